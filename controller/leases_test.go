package controller

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weir-io/weir/metadata"
)

// TestLeaseTableExpired: the leader's reasons to propose a fence: silence for
// lease+grace with no evidence; silence for the reported timeout after a gossip report,
// or for the suspect timeout after a closed heartbeat connection, each counting only
// when it came after the last heartbeat.
func TestLeaseTableExpired(t *testing.T) {
	after := fenceAfter{Closed: 400 * time.Millisecond, Reported: 800 * time.Millisecond, Silent: 3500 * time.Millisecond}
	t0 := time.Unix(1000, 0)
	v := viewWith([]metadata.Broker{{ID: 1, Epoch: 1, State: metadata.BrokerActive}, {ID: 2, Epoch: 4, State: metadata.BrokerActive}, {ID: 3, Epoch: 1, State: metadata.BrokerFenced}})
	l := newLeaseTable(t0, nil)
	if got := l.expired(v, t0, after); len(got) != 0 { // first look: fresh from now
		t.Fatalf("fenced at first sight: %v", got)
	}
	if got := l.expired(v, t0.Add(after.Silent), after); len(got) != 0 {
		t.Fatalf("fenced inside the silent timeout: %v", got)
	}
	l.renew(1, 1, "", t0.Add(2*time.Second))
	got := l.expired(v, t0.Add(after.Silent+time.Millisecond), after)
	if len(got) != 1 || got[0] != (fenceBrokerCmd{ID: 2, Epoch: 4, Plan: true}) {
		t.Fatalf("expired %v, want broker 2 epoch 4", got)
	}

	// A closed connection after the last heartbeat: the suspect timeout; a gossip
	// report: the reported timeout.
	l = newLeaseTable(t0, nil)
	l.renew(1, 1, "", t0)
	l.renew(2, 4, "", t0)
	l.connClosed(1, t0.Add(50*time.Millisecond))
	l.suspect(2, t0.Add(50*time.Millisecond))
	if got := l.expired(v, t0.Add(after.Closed), after); len(got) != 0 {
		t.Fatalf("fenced before the suspect timeout: %v", got)
	}
	got = l.expired(v, t0.Add(after.Closed+time.Millisecond), after)
	if len(got) != 1 || got[0].ID != 1 {
		t.Fatalf("closed connection: expired %v, want broker 1", got)
	}
	if got := l.expired(v, t0.Add(after.Reported), after); len(got) != 1 {
		t.Fatalf("gossip report acted on before the reported timeout: %v", got)
	}
	if got := l.expired(v, t0.Add(after.Reported+time.Millisecond), after); len(got) != 2 {
		t.Fatalf("gossip report: expired %v, want both", got)
	}
	// Evidence from before the last heartbeat is stale: the broker is alive.
	l = newLeaseTable(t0, nil)
	l.renew(2, 4, "", t0)
	l.connClosed(2, t0)
	l.suspect(2, t0)
	l.renew(2, 4, "", t0.Add(time.Millisecond))
	l.renew(1, 1, "", t0.Add(time.Millisecond))
	if got := l.expired(v, t0.Add(time.Second), after); len(got) != 0 {
		t.Fatalf("stale evidence fenced: %v", got)
	}
	// A broker that keeps heartbeating survives any evidence.
	for d := 100 * time.Millisecond; d < 3*time.Second; d += 100 * time.Millisecond {
		l.connClosed(2, t0.Add(d-time.Millisecond))
		l.suspect(2, t0.Add(d-time.Millisecond))
		l.renew(2, 4, "", t0.Add(d))
		l.renew(1, 1, "", t0.Add(d))
		if got := l.expired(v, t0.Add(d+after.Closed-time.Millisecond), after); len(got) != 0 {
			t.Fatalf("a heartbeating broker was fenced: %v", got)
		}
	}
	// A registration newer than the View waits.
	l = newLeaseTable(t0, nil)
	l.renew(1, 2, "", t0) // epoch 2 registered, View still says 1
	l.expired(v, t0, after)
	if got := l.expired(v, t0.Add(time.Hour), after); len(got) != 1 || got[0].ID != 2 {
		t.Fatalf("expired %v, want only broker 2", got)
	}
	// The configuration clamps the reported timeout between the other two.
	c := DefaultConfig()
	if fa := c.fenceAfter(); fa != (fenceAfter{Closed: 400 * time.Millisecond, Reported: 800 * time.Millisecond, Silent: 2250 * time.Millisecond}) {
		t.Fatalf("default fenceAfter %+v", fa)
	}
	c.SuspectTimeout, c.ReportedTimeout = time.Second, 0
	if fa := c.fenceAfter(); fa.Reported != time.Second {
		t.Fatalf("reported timeout below the suspect timeout used as is: %+v", fa)
	}
}

// TestLeaseTableVote: a controller votes to fence only after suspect of silence
// (counted from its start for a registration it never heard), and a yes is final: the
// registration's heartbeats are refused from then on, also after a restart when the
// vote was logged. This is what makes a lease from a majority end before any fence.
func TestLeaseTableVote(t *testing.T) {
	const suspect = 400 * time.Millisecond
	t0 := time.Unix(1000, 0)
	l := newLeaseTable(t0, nil)
	if yes, _, _ := l.vote(1, 1, t0.Add(suspect), suspect); yes {
		t.Fatal("voted yes within suspect of its own start")
	}
	if yes, fresh, _ := l.vote(1, 1, t0.Add(suspect+time.Millisecond), suspect); !yes || !fresh {
		t.Fatal("voted no for a registration never heard from since start")
	}
	if l.renew(1, 1, "x", t0.Add(time.Second)) {
		t.Fatal("a heartbeat of a registration voted out was acknowledged")
	}
	if !l.renew(1, 2, "y", t0.Add(time.Second)) {
		t.Fatal("a heartbeat of the next registration was refused")
	}

	l.renew(2, 3, "a", t0.Add(time.Second))
	if yes, _, silent := l.vote(2, 3, t0.Add(time.Second+suspect), suspect); yes || silent != suspect {
		t.Fatalf("voted yes after %v of silence", silent)
	}
	if !l.renew(2, 3, "a", t0.Add(time.Second+suspect)) {
		t.Fatal("a no vote refused the next heartbeat")
	}
	if yes, _, _ := l.vote(2, 3, t0.Add(time.Second+2*suspect+time.Millisecond), suspect); !yes {
		t.Fatal("voted no after more than suspect of silence")
	}
	if yes, fresh, _ := l.vote(2, 3, t0.Add(time.Second+2*suspect+2*time.Millisecond), suspect); !yes || fresh {
		t.Fatal("a second vote for the same registration is not the same yes")
	}
	if l.renew(2, 3, "a", t0.Add(2*time.Second)) || l.renew(2, 2, "a", t0.Add(2*time.Second)) {
		t.Fatal("a registration voted out (or an older one) was acknowledged")
	}
	// Re-registered here: the older registration is over for the broker itself.
	l.renew(4, 1, "a", t0)
	l.renew(4, 2, "b", t0.Add(time.Millisecond))
	if yes, _, _ := l.vote(4, 1, t0.Add(2*time.Millisecond), suspect); !yes {
		t.Fatal("voted no on a registration replaced by a newer one")
	}
	if l.renew(4, 1, "a", t0.Add(3*time.Millisecond)) {
		t.Fatal("a zombie of the replaced registration was acknowledged")
	}

	// The log keeps a yes across a restart.
	dir := t.TempDir()
	vl, err := openVoteLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := vl.record(7, 5); err != nil {
		t.Fatal(err)
	}
	vl.close()
	// A torn last line (a crash mid-append, never answered) is ignored.
	f, _ := os.OpenFile(filepath.Join(dir, voteLogFile), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("9 1")
	f.Close()
	vl, err = openVoteLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer vl.close()
	l = newLeaseTable(t0, vl)
	if l.renew(7, 5, "a", t0) || l.renew(7, 4, "a", t0) {
		t.Fatal("after a restart, a logged vote's registration was acknowledged")
	}
	if !l.renew(7, 6, "a", t0) || !l.renew(9, 1, "a", t0) {
		t.Fatal("a later registration, or one of a torn line, was refused")
	}
}
