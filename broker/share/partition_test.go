package share

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

var t0 = time.Unix(1000, 0)

func lim() Limits { return Limits{LockDuration: 30 * time.Second, DeliveryLimit: 3, MaxInFlight: 100} }

func spans(first, last int64) []Span { return []Span{{first, last}} }

func TestAcquireAcceptAdvancesStart(t *testing.T) {
	p := NewPartition(10, lim())
	got := p.Acquire("a", t0, spans(10, 14), nil, 0)
	if want := []Grant{{10, 14, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
	if again := p.Acquire("b", t0, spans(10, 14), nil, 0); len(again) != 0 {
		t.Fatalf("acquired records acquired again: %v", again)
	}
	if err := p.Ack("a", 12, 13, []AckType{AckAccept}); err != nil {
		t.Fatal(err)
	}
	if p.Start() != 10 {
		t.Fatalf("start %d moved over acquired 10-11", p.Start())
	}
	if err := p.Ack("a", 10, 11, []AckType{AckAccept, AckReject}); err != nil {
		t.Fatal(err)
	}
	if p.Start() != 14 || p.End() != 15 {
		t.Fatalf("start %d end %d, want 14 15", p.Start(), p.End())
	}
	if err := p.Ack("a", 12, 12, []AckType{AckAccept}); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("second ack of 12: %v", err)
	}
	if err := p.Ack("b", 14, 14, []AckType{AckAccept}); !errors.Is(err, ErrInvalidRecordState) {
		t.Fatalf("ack by a member not holding 14: %v", err)
	}
}

func TestReleaseRedeliversWithCount(t *testing.T) {
	p := NewPartition(0, lim())
	p.Acquire("a", t0, spans(0, 2), nil, 0)
	if err := p.Ack("a", 1, 1, []AckType{AckRelease}); err != nil {
		t.Fatal(err)
	}
	if p.NextFetch() != 1 {
		t.Fatalf("next fetch %d, want the released 1", p.NextFetch())
	}
	got := p.Acquire("b", t0, spans(1, 5), nil, 0)
	if want := []Grant{{1, 1, 2}, {3, 5, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
}

func TestLockTimeoutRedeliversThenArchivesAtLimit(t *testing.T) {
	p := NewPartition(0, lim())
	now := t0
	for d := int16(1); d <= 3; d++ {
		got := p.Acquire("a", now, spans(0, 0), nil, 0)
		if want := []Grant{{0, 0, d}}; !reflect.DeepEqual(got, want) {
			t.Fatalf("delivery %d: acquired %v", d, got)
		}
		if p.Expire(now.Add(29 * time.Second)) {
			t.Fatal("expired before the lock duration")
		}
		now = now.Add(30 * time.Second)
		if !p.Expire(now) {
			t.Fatal("lock did not expire")
		}
	}
	if st, _ := p.StateOf(0); st != Archived {
		t.Fatalf("after the limit: state %d, want archived", st)
	}
	if got := p.Acquire("a", now, spans(0, 0), nil, 0); len(got) != 0 {
		t.Fatalf("archived record delivered again: %v", got)
	}
	if p.Start() != 1 {
		t.Fatalf("start %d, want 1 past the archived record", p.Start())
	}
}

func TestReleaseMemberAndReject(t *testing.T) {
	p := NewPartition(0, lim())
	p.Acquire("a", t0, spans(0, 1), nil, 0)
	p.Acquire("b", t0, spans(0, 3), nil, 0)
	if !p.ReleaseMember("a") {
		t.Fatal("nothing released")
	}
	if st, _ := p.StateOf(2); st != Acquired {
		t.Fatal("b's record released with a's")
	}
	if err := p.Ack("b", 2, 3, []AckType{AckReject}); err != nil {
		t.Fatal(err)
	}
	if st, _ := p.StateOf(3); st != Archived {
		t.Fatalf("rejected record state %d", st)
	}
	if p.NextFetch() != 0 {
		t.Fatalf("next fetch %d, want 0", p.NextFetch())
	}
}

func TestMaxRecordsAndControlBatches(t *testing.T) {
	p := NewPartition(0, lim())
	got := p.Acquire("a", t0, []Span{{0, 0}, {1, 4}}, []bool{true, false}, 2)
	if want := []Grant{{1, 2, 1}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
	if p.Start() != 1 || p.End() != 3 {
		t.Fatalf("start %d end %d, want 1 3 (control archived, 2 records)", p.Start(), p.End())
	}
}

func TestSnapshotReloadGivesSameState(t *testing.T) {
	p := NewPartition(5, lim())
	p.Acquire("a", t0, spans(5, 12), nil, 0)
	_ = p.Ack("a", 6, 6, []AckType{AckAccept})
	_ = p.Ack("a", 7, 8, []AckType{AckRelease})
	_ = p.Ack("a", 9, 9, []AckType{AckReject})
	snap := p.Snapshot(3)
	dec, err := DecodeSnapshot(snap.Encode(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dec, snap) {
		t.Fatalf("decoded %+v, want %+v", dec, snap)
	}
	q := Restore(dec, lim())
	if q.Start() != 5 {
		t.Fatalf("start %d, want 5", q.Start())
	}
	for off := int64(5); off <= 13; off++ {
		ps, pn := p.StateOf(off)
		if ps == Acquired {
			ps = Available // locks do not survive a reload
		}
		qs, qn := q.StateOf(off)
		if ps != qs || (ps != Available || pn > 0) && pn != qn {
			t.Fatalf("offset %d: reloaded %d/%d, was %d/%d", off, qs, qn, ps, pn)
		}
	}
	got := q.Acquire("b", t0, spans(5, 12), nil, 0)
	want := []Grant{{5, 5, 2}, {7, 8, 2}, {10, 12, 2}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after reload acquired %v, want %v (no acked record again, counts kept)", got, want)
	}
	if _, err := DecodeSnapshot(snap.Encode(nil)[:20]); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("truncated snapshot: %v", err)
	}
}
