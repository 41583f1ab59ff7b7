// Package clock is the time the coordinators (broker/group, broker/txn) schedule by:
// an interface, so that their tests drive time by hand, and the real one.
package clock

import "time"

// Clock abstracts time so tests can control it.
type Clock interface {
	Now() time.Time
	// AfterFunc arranges for f to run once d has elapsed, in its own goroutine; never
	// synchronously from within AfterFunc (the coordinators call it holding a lock that
	// f takes).
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a handle on a function scheduled with Clock.AfterFunc.
type Timer interface {
	// Stop prevents the function from running if it has not started yet and reports
	// whether it did so. The coordinators never rely on the result: every scheduled
	// callback checks that it is still due.
	Stop() bool
}

// Real returns a Clock backed by the time package (a synctest bubble's fake time inside
// one).
func Real() Clock { return wall{} }

type wall struct{}

func (wall) Now() time.Time                            { return time.Now() }
func (wall) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
