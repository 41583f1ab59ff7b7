//go:build !linux

package controller

import "time"

// newLeaseClock returns the clock leases are measured on: the monotonic clock here
// (CLOCK_BOOTTIME, which keeps running while a VM is paused, is used on Linux).
func newLeaseClock() func() time.Duration { return monotonicLeaseClock() }
