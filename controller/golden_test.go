package controller

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/weir-io/weir/metadata"
)

// testdata/snapshot-v<SnapshotFormatVersion>.json is a committed fixture, not a build
// output. It is written only by
//
//	go test ./controller/ -run Golden -update
//
// which rewrites the current version's file and never an older one: a build must keep
// restoring every older snapshot (or refuse it with ErrSnapshotVersion), so a format
// change bumps SnapshotFormatVersion and adds a file instead of rewriting one.
// testdata/snapshot-unversioned.json was written by Persist before snapshots carried
// "format_version" and is never regenerated.
var update = flag.Bool("update", false, "rewrite the golden file of the current format version in testdata/")

const (
	goldenSnapshotV1          = "testdata/snapshot-v1.json"
	goldenSnapshotUnversioned = "testdata/snapshot-unversioned.json"
)

func persist(t *testing.T, snap *fsmSnapshot) []byte {
	t.Helper()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	if sink.cancelled {
		t.Fatal("Persist cancelled the sink")
	}
	return sink.Bytes()
}

func restoreFile(t *testing.T, f *FSM, path string) error {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return f.Restore(readCloser{bytes.NewReader(b)})
}

// TestGoldenSnapshotWrite checks that today's Persist writes the golden state exactly as
// the golden file holds it (the encoding is deterministic: encoding/json sorts map keys),
// both from the state itself and from an FSM that restored the file. It runs first so
// that -update rewrites the file before the other tests read it.
func TestGoldenSnapshotWrite(t *testing.T) {
	if SnapshotFormatVersion != 1 {
		t.Fatalf("SnapshotFormatVersion is %d: add the new version's golden file and state and compare against those", SnapshotFormatVersion)
	}
	got := persist(t, &fsmSnapshot{st: goldenStateV1()})
	if *update {
		if err := os.MkdirAll(filepath.Dir(goldenSnapshotV1), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenSnapshotV1, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s", goldenSnapshotV1)
	}
	want, err := os.ReadFile(goldenSnapshotV1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("today's snapshot of the golden state differs from %s:\n%s\nIf the change is deliberate and an "+
			"older controller would misread it, bump SnapshotFormatVersion, keep %s and add the new version's "+
			"golden file with go test ./controller/ -run Golden -update", goldenSnapshotV1, got, goldenSnapshotV1)
	}

	f := NewFSM(nil)
	if err := restoreFile(t, f, goldenSnapshotV1); err != nil {
		t.Fatal(err)
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if again := persist(t, snap.(*fsmSnapshot)); !bytes.Equal(again, want) {
		t.Fatalf("snapshot of the restored FSM differs from %s:\n%s", goldenSnapshotV1, again)
	}
}

// TestGoldenSnapshotRestore restores every committed snapshot into a fresh FSM and checks
// the state and the View built from it.
func TestGoldenSnapshotRestore(t *testing.T) {
	for _, path := range []string{goldenSnapshotV1, goldenSnapshotUnversioned} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			f := NewFSM(nil)
			if err := restoreFile(t, f, path); err != nil {
				t.Fatal(err)
			}
			want := goldenStateV1()
			if got := f.State(); !reflect.DeepEqual(got, want) {
				t.Fatalf("restored state\n%s\nwant\n%s", stateJSON(t, got), stateJSON(t, want))
			}

			v := f.View()
			if v.Version != 17 || v.ClusterID != "golden-cluster" || len(v.Brokers) != 3 ||
				v.Brokers[0].ID != 1 || v.Brokers[2].State != metadata.BrokerFenced {
				t.Fatalf("view %d %q brokers %+v", v.Version, v.ClusterID, v.Brokers)
			}
			orders := v.TopicByID(want.Topics["orders"].ID)
			if orders == nil || orders.Name != "orders" || len(orders.Partitions) != 2 {
				t.Fatalf("orders by ID: %+v", orders)
			}
			p0, p1 := orders.Partitions[0], orders.Partitions[1]
			if p0.Leader != 2 || p0.LeaderEpoch != 1 || len(p0.Logs) != 2 || p0.Logs[1] != (metadata.LogRange{Broker: 2, StartOffset: 42}) ||
				p0.UploadedThrough() != 100 {
				t.Fatalf("orders/0 %+v", p0)
			}
			if !p1.Moving || p1.MovingTo != 2 || p1.LogStartOffset != 50 {
				t.Fatalf("orders/1 %+v", p1)
			}
			if len(v.Objects) != 4 || v.Objects[3].Size != 3100 || v.Objects[4].State != metadata.ObjectPrepared {
				t.Fatalf("objects %+v", v.Objects)
			}
			// Object 1's range of orders/1 ends at 60, past the log start 50: not expired.
			if exp := v.ExpiredObjects(); len(exp) != 0 {
				t.Fatalf("expired objects %+v", exp)
			}
		})
	}
}

// TestGoldenSnapshotUnknownVersion: a snapshot of a newer format is refused with
// ErrSnapshotVersion, even when its fields no longer decode, and leaves the FSM as it was.
func TestGoldenSnapshotUnknownVersion(t *testing.T) {
	golden, err := os.ReadFile(goldenSnapshotV1)
	if err != nil {
		t.Fatal(err)
	}
	const field = `"format_version":1,`
	if !bytes.HasPrefix(golden, []byte("{"+field)) {
		t.Fatalf("%s does not start with %s", goldenSnapshotV1, field)
	}
	next := fmt.Sprintf(`"format_version":%d,`, SnapshotFormatVersion+1)
	newer := bytes.Replace(golden, []byte(field), []byte(next), 1)
	undecodable := bytes.Replace(newer, []byte(`"brokers":{`), []byte(`"brokers":[{`), 1)
	undecodable = bytes.Replace(undecodable, []byte(`},"topics"`), []byte(`}],"topics"`), 1)
	// The same change at version 1 does not decode, so the version is what gets reported.
	if err := NewFSM(nil).Restore(readCloser{bytes.NewReader(bytes.Replace(undecodable, []byte(next), []byte(field), 1))}); err == nil || errors.Is(err, ErrSnapshotVersion) {
		t.Fatalf("brokers as a list at version 1: %v, want a decode error", err)
	}

	for name, snap := range map[string][]byte{"newer": newer, "newer and undecodable": undecodable} {
		t.Run(name, func(t *testing.T) {
			f := NewFSM(nil)
			if err := restoreFile(t, f, goldenSnapshotV1); err != nil {
				t.Fatal(err)
			}
			err := f.Restore(readCloser{bytes.NewReader(snap)})
			if !errors.Is(err, ErrSnapshotVersion) || !strings.Contains(err.Error(), fmt.Sprint(SnapshotFormatVersion+1)) {
				t.Fatalf("Restore: %v, want ErrSnapshotVersion naming version %d", err, SnapshotFormatVersion+1)
			}
			if got := f.State(); !reflect.DeepEqual(got, goldenStateV1()) {
				t.Fatalf("a refused snapshot changed the state:\n%s", stateJSON(t, got))
			}
			if f.restores.Load() != 1 {
				t.Fatal("a refused snapshot was counted as restored")
			}
		})
	}
}
