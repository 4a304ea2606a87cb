//go:build !unix

package main

// diskFree cannot tell on this OS: the demo then skips its disk check.
func diskFree(string) (uint64, bool) { return 0, false }
