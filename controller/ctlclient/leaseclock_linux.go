//go:build linux

package ctlclient

import (
	"math"
	"time"

	"golang.org/x/sys/unix"
)

// newLeaseClock returns the clock leases are measured on: CLOCK_BOOTTIME, which keeps
// running while the machine is suspended or the VM paused (Go's monotonic clock,
// CLOCK_MONOTONIC, may not), so a broker that wakes from a pause sees its lease expired
// rather than still running. Without CLOCK_BOOTTIME it falls back to the monotonic
// clock. A reading that fails later returns the largest duration: every lease looks
// expired, never valid.
func newLeaseClock() func() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return monotonicLeaseClock()
	}
	return func() time.Duration {
		var ts unix.Timespec
		if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
			return math.MaxInt64
		}
		return time.Duration(ts.Nano())
	}
}
