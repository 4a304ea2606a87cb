//go:build unix

package bench

import (
	"syscall"
	"time"
)

// ProcessCPU is the CPU time (user + system) the process used so far; ok is
// false where the platform does not say.
func ProcessCPU() (d time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
