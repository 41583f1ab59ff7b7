package ackcheck

import "testing"

func TestVerify(t *testing.T) {
	tp := TP{"t", 0}
	c := New()
	c.Acked(tp, 0, "a")
	c.Acked(tp, 1, "b")
	c.Read(tp, 0, "a")
	c.Read(tp, 1, "b")
	c.Read(tp, 2, "c") // unacked but present: fine
	if r := c.Verify(); !r.OK() || r.Acked != 2 || r.Read != 3 {
		t.Fatalf("clean log: %v", r)
	}

	c = New()
	c.Acked(tp, 0, "a")
	c.Acked(tp, 1, "b")
	c.Acked(tp, 2, "c")
	c.Acked(tp, 5, "x")
	c.Read(tp, 0, "a")
	c.Read(tp, 1, "z") // another record where b was acked
	c.Read(tp, 3, "a") // a again: a duplicate, and 2 is missing
	r := c.Verify()
	if len(r.Lost) != 2 || len(r.Inconsistent) != 1 || len(r.Duplicated) != 1 || len(r.Gaps) != 1 || r.OK() {
		t.Fatalf("violations not found: %v", r)
	}

	c = New()
	c.Acked(tp, 0, "a")
	c.Acked(tp, 0, "b") // two writers acked one offset
	c.Read(tp, 0, "a")
	if r := c.Verify(); len(r.Inconsistent) != 1 {
		t.Fatalf("double ack not found: %v", r)
	}
}

func TestGroupResume(t *testing.T) {
	tp := TP{"t", 0}
	c := New()
	c.Resumed("g", tp, 0) // no commit yet: not checked
	c.Committing("g", tp, 10)
	c.Committed("g", tp, 10)
	c.Committing("g", tp, 15) // its answer never came
	c.Resumed("g", tp, 10)    // fine: the acknowledged commit
	c.Resumed("g", tp, 15)    // fine: the one in flight was applied
	if r := c.Verify(); !r.OK() {
		t.Fatalf("resumes at commits: %v", r)
	}
	c.Resumed("g", tp, 9)  // re-read below an acknowledged commit
	c.Resumed("g", tp, 16) // skipped past every commit
	if r := c.Verify(); len(r.Group) != 2 || r.OK() {
		t.Fatalf("bad resumes not found: %v", r)
	}
}
