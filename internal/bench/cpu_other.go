//go:build !unix

package bench

import "time"

// ProcessCPU is the CPU time the process used so far; ok is false where the
// platform does not say (here).
func ProcessCPU() (time.Duration, bool) { return 0, false }
