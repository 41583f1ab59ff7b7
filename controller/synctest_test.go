package controller

import (
	"testing"
	"testing/synctest"
	"time"
)

// Timing tests of the in-memory quorum (memCluster) run in testing/synctest bubbles:
// time is fake there and jumps ahead whenever every goroutine of the bubble waits, so
// Raft's timeouts, the lease checks and the balancer's rounds take no real time, and a
// test can assert when something happened to the nanosecond of the fake clock instead
// of "eventually". synctest.Test fails a test that leaves a goroutine of the bubble
// behind: every goroutine a Controller starts must end in Close.

// untilFake waits, in a bubble, until cond holds and returns the fake time that took:
// it checks once the bubble has settled (synctest.Wait: every other goroutine waits),
// then again every step of fake time, so an event is seen at most step after the
// instant it happened. It fails the test once limit has passed.
func untilFake(t testing.TB, limit, step time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		synctest.Wait()
		if cond() {
			return time.Since(start)
		}
		if time.Since(start) >= limit {
			t.Fatalf("%s: not within %v of the fake clock", what, limit)
		}
		time.Sleep(step) // fake clock: the next look
	}
}

// settle lets the bubble's fake clock run for d (every goroutine that wakes in that
// time runs) and returns once the bubble is quiet again at the end of it.
func settle(d time.Duration) {
	time.Sleep(d) // fake clock: d passes for the whole bubble
	synctest.Wait()
}
