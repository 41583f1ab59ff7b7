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
