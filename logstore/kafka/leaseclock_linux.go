package kafka

import (
	"math"
	"time"

	"golang.org/x/sys/unix"
)

// bootClock says whether CLOCK_BOOTTIME can be read (every Linux since
// 2.6.39); decided once, so that leaseNow never mixes two clocks.
var bootClock = func() bool {
	var ts unix.Timespec
	return unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) == nil
}()

// leaseNow reads the clock that leases are measured on: CLOCK_BOOTTIME.
// Unlike CLOCK_MONOTONIC (Go's monotonic clock), it keeps counting while
// the machine is suspended, so a lease cannot look fresh to a store that
// wakes from a suspend during which its region was claimed.
func leaseNow() time.Duration {
	if !bootClock {
		return monotonicNow()
	}
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		// Too late in the future for any lease to cover: the append waits
		// for a look instead.
		return math.MaxInt64 / 2
	}
	return time.Duration(ts.Nano())
}
