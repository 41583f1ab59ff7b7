// Package testutil holds helpers shared by the tests of several packages, so that each
// package does not grow its own slightly different copy.
package testutil

import (
	"errors"
	"testing"
	"time"
)

// maxPoll bounds the backoff between two checks: short enough that a test does not
// oversleep a condition by much, long enough that a waiting test does not spin a core
// (the tests run with -race on 2 cores, next to the goroutines they wait for).
const maxPoll = 20 * time.Millisecond

// Eventually polls cond until it returns true and fails the test with what and the
// elapsed time if it still does not after timeout. It is how a test waits for
// something another goroutine does: a fixed sleep is either too short on a loaded
// machine or wasted time on an idle one. Timeouts are meant to be generous; nothing is
// asserted about how long the wait took.
//
// The first check is immediate and the polls back off from 1 ms to maxPoll, so a
// condition that is almost true costs almost nothing. cond runs on the caller's
// goroutine (it may call t.Fatal), and once more after the deadline, so a condition
// that became true during the last sleep is not reported as a timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	EventuallyNoError(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// errNotYet stands for a condition that does not hold yet; it is never reported.
var errNotYet = errors.New("testutil: condition not met yet")

// EventuallyNoError is Eventually for an attempt that can fail (binding a port the
// previous instance may still hold, dialling a server that is starting): it retries f
// until it returns nil and on timeout reports the last error, which says more than
// "timed out".
func EventuallyNoError(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	poll := time.Millisecond
	for {
		err := f()
		if err == nil {
			return
		}
		if !time.Now().Before(deadline) {
			if err == errNotYet {
				t.Fatalf("testutil: timed out after %v waiting for %s", time.Since(start).Round(time.Millisecond), what)
			} else {
				t.Fatalf("testutil: timed out after %v waiting for %s: last error: %v", time.Since(start).Round(time.Millisecond), what, err)
			}
			return
		}
		time.Sleep(min(poll, time.Until(deadline)))
		poll = min(2*poll, maxPoll)
	}
}
