package ctlclient

import "time"

// monotonicLeaseClock reads Go's monotonic clock as a duration since its creation.
func monotonicLeaseClock() func() time.Duration {
	start := time.Now()
	return func() time.Duration { return time.Since(start) }
}
