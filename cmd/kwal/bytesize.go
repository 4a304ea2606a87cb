package main

import (
	"fmt"

	"github.com/dustin/go-humanize"
)

// byteSize is a flag of a number of bytes written with a unit: "256MB",
// "1.5GiB", "4096" (go-humanize's ParseBytes: kB/MB/GB are powers of 1000,
// KiB/MiB/GiB of 1024).
type byteSize uint64

func (b *byteSize) Set(s string) error {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return fmt.Errorf("not a size (write it like 256MB or 1GiB)")
	}
	*b = byteSize(n)
	return nil
}

func (b *byteSize) String() string { return humanize.Bytes(uint64(*b)) }

// Type names the kind of value in the help and marks the flag numeric
// for the limits (limits.go).
func (b *byteSize) Type() string { return "bytes" }
