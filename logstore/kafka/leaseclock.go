package kafka

import "time"

// clockBase anchors monotonicNow.
var clockBase = time.Now()

// monotonicNow is Go's monotonic clock as a duration since the process
// began.
func monotonicNow() time.Duration { return time.Since(clockBase) }
