package metadata

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// testdata/metadata-v<LocalFormatVersion>.json is a committed fixture, not a build
// output. It is written only by
//
//	go test ./metadata/ -run Golden -update
//
// which rewrites the current version's file and never an older one: a build must keep
// opening every older file (or refuse it with ErrFormatVersion), so a format change
// bumps LocalFormatVersion and adds a file instead of rewriting one.
// testdata/metadata-unversioned.json was written before the file carried
// "format_version" and is never regenerated.
var update = flag.Bool("update", false, "rewrite the golden file of the current format version in testdata/")

const (
	goldenMetadataV1          = "testdata/metadata-v1.json"
	goldenMetadataUnversioned = "testdata/metadata-unversioned.json"
)

// copyGolden copies a golden file to a temporary metadata.json: OpenLocal's store
// rewrites its file on every change, and testdata must never change in a test run.
func copyGolden(t *testing.T, golden string) string {
	t.Helper()
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "metadata.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// persistTo writes s's state to path with the store's own encoder.
func persistTo(t *testing.T, s *LocalStore, path string) []byte {
	t.Helper()
	s.cfg.Path = path
	if err := s.persist(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGoldenMetadataWrite checks that today's LocalStore writes the golden state exactly
// as the golden file holds it (the encoding is deterministic: encoding/json sorts map
// keys), both from the state itself and after opening the file. It runs first so that
// -update rewrites the file before the other tests read it.
func TestGoldenMetadataWrite(t *testing.T) {
	if LocalFormatVersion != 1 {
		t.Fatalf("LocalFormatVersion is %d: add the new version's golden file and state and compare against those", LocalFormatVersion)
	}
	s := &LocalStore{state: goldenLocalStateV1(), changed: make(chan struct{})}
	got := persistTo(t, s, filepath.Join(t.TempDir(), "metadata.json"))
	if *update {
		if err := os.MkdirAll(filepath.Dir(goldenMetadataV1), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenMetadataV1, got, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s", goldenMetadataV1)
	}
	want, err := os.ReadFile(goldenMetadataV1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("today's LocalStore writes the golden state differently from %s:\n%s\nIf the change is "+
			"deliberate and an older build would misread it, bump LocalFormatVersion, keep %s and add the new "+
			"version's golden file with go test ./metadata/ -run Golden -update", goldenMetadataV1, got, goldenMetadataV1)
	}

	opened, err := OpenLocal(LocalConfig{Path: copyGolden(t, goldenMetadataV1)})
	if err != nil {
		t.Fatal(err)
	}
	if again := persistTo(t, opened, filepath.Join(t.TempDir(), "metadata.json")); !bytes.Equal(again, want) {
		t.Fatalf("the opened golden file is written back differently:\n%s", again)
	}
}

// TestGoldenMetadataOpen opens a copy of every committed file and checks the state:
// topics, configs, log start offsets, manifests, next producer ID, objects.
func TestGoldenMetadataOpen(t *testing.T) {
	for _, golden := range []string{goldenMetadataV1, goldenMetadataUnversioned} {
		t.Run(filepath.Base(golden), func(t *testing.T) {
			path := copyGolden(t, golden)
			s, err := OpenLocal(LocalConfig{Path: path, Self: Broker{ID: 1, Host: "localhost", Port: 9092}})
			if err != nil {
				t.Fatal(err)
			}
			want := goldenLocalStateV1()
			if !reflect.DeepEqual(s.state, want) {
				t.Fatalf("opened state\n%+v\nwant\n%+v", s.state, want)
			}

			v := s.View()
			if v.ClusterID != "golden-local-cluster" || v.Version != 23 || len(v.Topics) != 2 {
				t.Fatalf("view %q version %d, %d topics", v.ClusterID, v.Version, len(v.Topics))
			}
			orders := v.TopicByID(want.Topics["orders"].ID)
			if orders == nil || orders.Name != "orders" || len(orders.Partitions) != 3 {
				t.Fatalf("orders by ID: %+v", orders)
			}
			if c, explicit := orders.Config("cleanup.policy"); c != "compact,delete" || !explicit {
				t.Fatalf("orders cleanup.policy %q (explicit %v)", c, explicit)
			}
			if _, explicit := v.Topics["events"].Config("retention.ms"); explicit {
				t.Fatal("events has explicit configs")
			}
			for i, want := range []int64{0, 50, 12} {
				if got := orders.Partitions[i].LogStartOffset; got != want {
					t.Fatalf("orders/%d log start %d, want %d", i, got, want)
				}
			}
			if m := orders.Partitions[0].Objects; len(m) != 2 || !m[1].Equal(ObjectRange{Object: 3, FirstOffset: 42, LastOffset: 99, MaxTimestamp: 1_700_000_000_900, Bytes: 3000}) {
				t.Fatalf("orders/0 manifest %+v", m)
			}
			if m := v.Topics["events"].Partitions[0].Objects; len(m) != 1 || !m[0].Equal(ObjectRange{Object: 2, FirstOffset: 0, LastOffset: 9}) {
				t.Fatalf("events/0 manifest %+v", m)
			}
			if len(v.Objects) != 4 || v.Objects[1].State != ObjectCommitted || v.Objects[4].State != ObjectPrepared || v.Objects[3].Size != 3100 {
				t.Fatalf("objects %+v", v.Objects)
			}

			// The store carries on from the file: the next producer ID and object ID.
			if id, err := s.AllocateProducerID(context.Background()); err != nil || id != 7 {
				t.Fatalf("AllocateProducerID: %d, %v; want 7", id, err)
			}
			if o, err := s.PrepareObject(context.Background()); err != nil || o.ID != 5 {
				t.Fatalf("PrepareObject: %+v, %v; want object 5", o, err)
			}
			// Written back with the current version, also when the file had none.
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(b, []byte("{\n \"format_version\": 1,\n")) {
				t.Fatalf("rewritten file starts %q", b[:min(len(b), 40)])
			}
		})
	}
}

// TestGoldenMetadataUnknownVersion: a file of a newer format is refused with
// ErrFormatVersion naming the file and the version, even when its fields no longer
// parse, and the file is left as it was.
func TestGoldenMetadataUnknownVersion(t *testing.T) {
	golden, err := os.ReadFile(goldenMetadataV1)
	if err != nil {
		t.Fatal(err)
	}
	const field = "\n \"format_version\": 1,\n"
	if !bytes.HasPrefix(golden, []byte("{"+field)) {
		t.Fatalf("%s does not start with %q", goldenMetadataV1, field)
	}
	next := fmt.Sprintf("\n \"format_version\": %d,\n", LocalFormatVersion+1)
	newer := bytes.Replace(golden, []byte(field), []byte(next), 1)
	undecodable := bytes.Replace(newer, []byte(`"next_producer_id": 7`), []byte(`"next_producer_id": "7"`), 1)
	if bytes.Equal(undecodable, newer) {
		t.Fatal("next_producer_id not found")
	}
	for name, content := range map[string][]byte{"newer": newer, "newer and undecodable": undecodable} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "metadata.json")
			if err := os.WriteFile(path, content, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := OpenLocal(LocalConfig{Path: path})
			if !errors.Is(err, ErrFormatVersion) || !strings.Contains(err.Error(), path) ||
				!strings.Contains(err.Error(), fmt.Sprint(LocalFormatVersion+1)) {
				t.Fatalf("OpenLocal: %v, want ErrFormatVersion naming %s and version %d", err, path, LocalFormatVersion+1)
			}
			if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, content) {
				t.Fatalf("a refused file was changed (%v)", err)
			}
		})
	}
}
