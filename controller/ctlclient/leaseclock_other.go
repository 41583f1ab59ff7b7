//go:build !linux

package ctlclient

import "time"

// newLeaseClock returns the clock leases are measured on: the monotonic clock here
// (CLOCK_BOOTTIME, which keeps running while a VM is paused, is used on Linux).
func newLeaseClock() func() time.Duration { return monotonicLeaseClock() }
