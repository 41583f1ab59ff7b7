package partlog

import (
	"errors"
	"reflect"
	"testing"

	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
)

// producerWindows is the producer state in comparable form: per producer, its epoch and
// its window of [first, last, offset].
func producerWindows(p *Partition) map[int64][]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[int64][]any{}
	for id, s := range p.producers {
		w := []any{s.epoch}
		for _, e := range s.entries {
			w = append(w, [4]int64{int64(e.epoch), int64(e.first), int64(e.last), e.offset})
		}
		out[id] = w
	}
	return out
}

// loadFrom builds a partition the way a new leader does: the metadata (a manifest whose
// one range ends at through, its snapshot, the log start) and then the batches of src
// from offset from on, as a load finds them in the WALs that were not trimmed.
func loadFrom(t *testing.T, src *Partition, log *memLog, through, logStart, from int64, snap *metadata.ProducerSnapshot) *Partition {
	t.Helper()
	mp := metadata.Partition{LeaderEpoch: 5, LogStartOffset: logStart, Logs: []metadata.LogRange{{Broker: 1}},
		Objects: []metadata.ObjectRange{{Object: 1, FirstOffset: 0, LastOffset: through}}, Producers: snap}
	p := New("t", metadata.TopicID{1}, 0, 5, logStart)
	p.Apply(mp, metadata.NewView(1, "c", 1, nil, nil), true)
	for _, b := range src.Batches() {
		if b.Base < from {
			continue
		}
		data := make([]byte, b.Size)
		if err := b.Src.ReadAt(data, b.Pos); err != nil {
			t.Fatal(err)
		}
		h, err := recbatch.Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		p.Collect(&h, log, b.Pos, int(b.Size))
	}
	if gaps, err := p.FinishLoad(-1, false, true); err != nil || len(gaps) != 0 {
		t.Fatalf("load: gaps %v, %v", gaps, err)
	}
	return p
}

// prepareBatch offers p a batch of producer pid and returns its base offset, or the
// original offset of a duplicate (dup), or the error.
func prepareBatch(p *Partition, pid int64, epoch int16, seq int32, n int) (offset int64, dup bool, err error) {
	vals := make([][]byte, n)
	for i := range vals {
		vals[i] = []byte{byte(i)}
	}
	b := kafkatest.Batch(pid, epoch, seq, vals...)
	h, err := recbatch.ValidateProduce(b, 0)
	if err != nil {
		return 0, false, err
	}
	pr, err := p.Prepare(&h, b, -1)
	switch {
	case err != nil:
		return 0, false, err
	case pr.Dup != nil:
		return pr.Dup.Offset, true, nil
	}
	return pr.Base(), false, nil
}

// The state a load restores from a snapshot of the manifest's end plus the WAL batches
// after it is the state of the partition that wrote them, whether the snapshot was taken
// right at the range's end or later (its windows then lost batches to newer ones and to
// new epochs), and loading again changes nothing. Retries of any batch in a window are
// recognised; sequences and epochs keep being checked.
func TestRestoreProducersFromSnapshotAndWAL(t *testing.T) {
	src, log := ready(t), &memLog{}
	must := func(pid int64, epoch int16, seq int32, n int) {
		t.Helper()
		if _, err := appendSynced(t, src, log, pid, epoch, seq, n); err != nil {
			t.Fatal(err)
		}
	}
	// Offsets 0..9 go to an object (through = 9).
	for i := int32(0); i < 7; i++ {
		must(1, 0, i, 1) // producer 1: seq 0..6 at offsets 0..6, window 2..6
	}
	must(2, 0, 0, 1) // producer 2, epoch 0: offsets 7, 8
	must(2, 0, 1, 1)
	must(3, 0, 0, 1) // producer 3: offset 9, nothing later
	const through = 9
	atEnd := src.ProducerSnapshot(through)
	// After the range, in the WAL: producer 1 seq 7, 8 (offsets 10, 11), producer 2 in a
	// new epoch (12), producer 4 (13, 14), then five more of producer 1 (15..19), which push
	// all its batches at or below 9 out of its window.
	must(1, 0, 7, 1)
	must(1, 0, 8, 1)
	must(2, 1, 0, 1)
	must(4, 0, 0, 2)
	for i := int32(9); i < 14; i++ {
		must(1, 0, i, 1)
	}
	later := src.ProducerSnapshot(through)
	if n := src.SnapshotProducers(through); n != 1 {
		t.Fatalf("SnapshotProducers(%d) = %d now, want 1 (producer 3)", through, n)
	}

	wantAtEnd := &metadata.ProducerSnapshot{Offset: 10, Producers: []metadata.ProducerState{
		{ID: 1, Batches: [][3]int64{{2, 2, 2}, {3, 3, 3}, {4, 4, 4}, {5, 5, 5}, {6, 6, 6}}},
		{ID: 2, Batches: [][3]int64{{0, 0, 7}, {1, 1, 8}}},
		{ID: 3, Batches: [][3]int64{{0, 0, 9}}},
	}}
	if !reflect.DeepEqual(atEnd, wantAtEnd) {
		t.Fatalf("snapshot at the range's end %+v, want %+v", atEnd, wantAtEnd)
	}
	// Taken later, only producer 3 still has batches at or below 9 in its window.
	if want := (&metadata.ProducerSnapshot{Offset: 10, Producers: wantAtEnd.Producers[2:]}); !reflect.DeepEqual(later, want) {
		t.Fatalf("later snapshot %+v, want %+v", later, want)
	}
	if s := src.ProducerSnapshot(-1); s != nil {
		t.Fatalf("snapshot before any batch: %+v", s)
	}

	want := producerWindows(src)
	for name, snap := range map[string]*metadata.ProducerSnapshot{"at the end": atEnd, "later": later} {
		t.Run(name, func(t *testing.T) {
			// The WAL was trimmed below 10: only the batches after the range are found.
			p := loadFrom(t, src, log, through, 0, through+1, snap)
			if got := producerWindows(p); !reflect.DeepEqual(got, want) {
				t.Fatalf("restored state\n%v\nwant\n%v", got, want)
			}
			// The WAL not trimmed yet: batches below 10 are found too; the same state.
			if got := producerWindows(loadFrom(t, src, log, through, 0, 0, snap)); !reflect.DeepEqual(got, want) {
				t.Fatalf("restored state with the WAL untrimmed\n%v\nwant\n%v", got, want)
			}
			// A load retried (a recovery whose completion failed) changes nothing.
			if _, err := p.FinishLoad(-1, false, true); err != nil {
				t.Fatal(err)
			}
			if got := producerWindows(p); !reflect.DeepEqual(got, want) {
				t.Fatalf("state after loading again\n%v\nwant\n%v", got, want)
			}

			for _, c := range []struct {
				what   string
				pid    int64
				epoch  int16
				seq    int32
				n      int
				offset int64
				dup    bool
				err    error
			}{
				{"producer 3's only batch, from the snapshot alone", 3, 0, 0, 1, 9, true, nil},
				{"producer 1's oldest batch in the window", 1, 0, 9, 1, 15, true, nil},
				{"producer 1's last batch", 1, 0, 13, 1, 19, true, nil},
				{"producer 1 before its window", 1, 0, 8, 1, 0, false, ErrOutOfOrderSeq},
				{"producer 2's old epoch", 2, 0, 2, 1, 0, false, ErrProducerFenced},
				{"producer 2's retry in its new epoch", 2, 1, 0, 1, 12, true, nil},
				{"producer 4's retry", 4, 0, 0, 2, 13, true, nil},
				{"producer 3's gap", 3, 0, 5, 1, 0, false, ErrOutOfOrderSeq},
				{"producer 3 continues", 3, 0, 1, 1, 20, false, nil},
			} {
				off, dup, err := prepareBatch(p, c.pid, c.epoch, c.seq, c.n)
				if !errors.Is(err, c.err) || c.err == nil && (off != c.offset || dup != c.dup) {
					t.Fatalf("%s: offset %d dup %v err %v; want offset %d dup %v err %v", c.what, off, dup, err, c.offset, c.dup, c.err)
				}
			}
		})
	}
}

// A snapshot that does not reach where the WAL batches must start is not used: the
// batches between may be in no WAL any more (DeleteRecords moved the log start past the
// manifest's end), and a stale window would refuse the producer's next sequence. The
// state then comes from the WALs alone, as before snapshots.
func TestStaleProducerSnapshotIgnored(t *testing.T) {
	src, log := ready(t), &memLog{}
	for i := int32(0); i < 6; i++ {
		if _, err := appendSynced(t, src, log, 1, 0, i, 1); err != nil {
			t.Fatal(err)
		}
	}
	snap := src.ProducerSnapshot(2) // as of 3: seq 0..2
	p := loadFrom(t, src, log, 2, 5, 5, snap)
	if got, want := producerWindows(p), map[int64][]any{1: {int16(0), [4]int64{0, 5, 5, 5}}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("state %v, want %v (from the WAL batch at 5 only)", got, want)
	}
	if off, _, err := prepareBatch(p, 1, 0, 6, 1); err != nil || off != 6 {
		t.Fatalf("next sequence: offset %d, %v", off, err)
	}
}

// The snapshot keeps the metadata.MaxSnapshotProducers producers whose last batch at or
// below its offset is the most recent, in ID order.
func TestProducerSnapshotBound(t *testing.T) {
	p, log := ready(t), &memLog{}
	const n = metadata.MaxSnapshotProducers + 5
	// IDs descend as offsets ascend, so the most recent are the lowest IDs.
	for i := 0; i < n; i++ {
		if _, err := appendSynced(t, p, log, int64(n-i), 0, 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	s := p.ProducerSnapshot(n - 1)
	if len(s.Producers) != metadata.MaxSnapshotProducers || p.SnapshotProducers(n-1) != metadata.MaxSnapshotProducers {
		t.Fatalf("%d producers in the snapshot", len(s.Producers))
	}
	for i, ps := range s.Producers {
		if ps.ID != int64(i+1) || ps.Batches[0][2] != int64(n-1-i) {
			t.Fatalf("producer %d of the snapshot: %+v", i, ps)
		}
	}
}
