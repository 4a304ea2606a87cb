//go:build !linux

package kafka

import "time"

// leaseNow reads the clock that leases are measured on: Go's monotonic
// clock, which on some systems stops while the machine is suspended
// (docs/fencing.md, "Lease").
func leaseNow() time.Duration { return monotonicNow() }
