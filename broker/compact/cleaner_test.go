package compact

import (
	"fmt"
	"slices"
	"testing"

	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
)

// rec is a record of a test batch: key, value ("" with tomb: null value).
type rec struct {
	key, val string
	tomb     bool
}

// mkBatch builds a stored batch at base with recs (offsets base, base+1, ...).
func mkBatch(t testing.TB, base int64, codec int16, pid int64, txn bool, recs ...rec) []byte {
	t.Helper()
	attrs := codec
	if txn {
		attrs |= 0x10
	}
	h := recbatch.Header{BaseOffset: base, LastOffsetDelta: int32(len(recs) - 1), Attributes: attrs, MaxTimestamp: 1000 + base,
		ProducerID: pid, ProducerEpoch: 0, BaseSequence: -1}
	var rs []recbatch.Record
	for i, r := range recs {
		v := []byte(r.val)
		if r.tomb {
			v = nil
		}
		rs = append(rs, recbatch.Record{Offset: base + int64(i), Timestamp: 1000 + base + int64(i), Key: []byte(r.key), Value: v})
	}
	b, err := recbatch.Rebuild(h, rs, -1)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mkMarker(base, pid int64, commit bool) []byte {
	b := recbatch.EncodeMarker(recbatch.Marker{ProducerID: pid, Commit: commit}, 1000+base)
	recbatch.SetOffsetEpoch(b, base, 0)
	return b
}

// survivor is a kept record as a consumer sees it.
type survivor struct {
	off      int64
	key, val string
	tomb     bool
}

func survivors(t testing.TB, batches [][]byte) []survivor {
	t.Helper()
	var out []survivor
	prev := int64(-1)
	for _, b := range batches {
		if !recbatch.CRCOK(b) {
			t.Fatalf("batch CRC wrong")
		}
		h, recs, err := recbatch.ReadRecords(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		if h.BaseOffset <= prev {
			t.Fatalf("batch at %d after %d", h.BaseOffset, prev)
		}
		prev = h.LastOffset()
		if h.Control() {
			continue
		}
		for _, r := range recs {
			out = append(out, survivor{r.Offset, string(r.Key), string(r.Value), r.Value == nil})
		}
	}
	return out
}

// clean builds the map over all batches (the whole log is dirty) and cleans them.
func clean(t testing.TB, batches [][]byte, now int64, aborted []metadata.AbortedTxn) (Result, *Cleaner) {
	t.Helper()
	ab := NewAborted(aborted)
	m := NewOffsetMap(0)
	for _, b := range batches {
		if err := m.Add(b, ab, 0); err != nil {
			t.Fatal(err)
		}
	}
	c := &Cleaner{Map: m, Aborted: ab, NowMs: now, DeleteRetentionMs: 100}
	res, err := c.Clean(batches, true)
	if err != nil {
		t.Fatal(err)
	}
	return res, c
}

// TestCleanKeepsLatestAtItsOffset: exactly each key's latest record survives, at its
// original offset, and batches keep their base offsets and offset ranges.
func TestCleanKeepsLatestAtItsOffset(t *testing.T) {
	in := [][]byte{
		mkBatch(t, 0, 0, -1, false, rec{key: "a", val: "a0"}, rec{key: "b", val: "b0"}, rec{key: "c", val: "c0"}),
		mkBatch(t, 3, 0, -1, false, rec{key: "a", val: "a1"}, rec{key: "b", val: "b1"}),
		mkBatch(t, 5, 0, -1, false, rec{key: "d", val: "d0"}),
		mkBatch(t, 6, 0, -1, false, rec{key: "a", val: "a2"}, rec{key: "a", val: "a3"}),
		mkBatch(t, 8, 0, -1, false, rec{key: "b", val: "b2"}, rec{key: "e", val: "e0"}),
	}
	res, c := clean(t, in, 0, nil)
	want := []survivor{{2, "c", "c0", false}, {5, "d", "d0", false}, {7, "a", "a3", false}, {8, "b", "b2", false}, {9, "e", "e0", false}}
	if got := survivors(t, res.Batches); !slices.Equal(got, want) {
		t.Fatalf("survivors %+v\nwant %+v", got, want)
	}
	var spans [][2]int64
	for _, b := range res.Batches {
		h, _ := recbatch.Parse(b)
		spans = append(spans, [2]int64{h.BaseOffset, h.LastOffset()})
	}
	// Batch 1 (3-4) lost both records and is gone; the others keep their spans.
	if want := [][2]int64{{0, 2}, {5, 5}, {6, 7}, {8, 9}}; !slices.Equal(spans, want) {
		t.Fatalf("batch spans %v, want %v", spans, want)
	}
	if !res.Changed || c.Stats.RecordsRemoved != 5 || c.Stats.BatchesRemoved != 1 {
		t.Fatalf("changed %v stats %+v", res.Changed, c.Stats)
	}
	// Cleaning the result again changes nothing (a compacted range is not rewritten).
	res2, _ := clean(t, res.Batches, 0, nil)
	if res2.Changed {
		t.Fatal("a second clean changed a clean log")
	}
}

// TestCleanKeepsEmptyLastBatch: the last batch of a range whose records all went stays,
// empty, so the range's last offset is still stored.
func TestCleanKeepsEmptyLastBatch(t *testing.T) {
	in := [][]byte{
		mkBatch(t, 0, 0, -1, false, rec{key: "a", val: "new"}),
	}
	m := NewOffsetMap(0)
	m.m[hashKey([]byte("a"))] = 50 // superseded by a record in a later range
	c := &Cleaner{Map: m}
	res, err := c.Clean(in, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Batches) != 1 || len(survivors(t, res.Batches)) != 0 {
		t.Fatalf("batches %d survivors %v", len(res.Batches), survivors(t, res.Batches))
	}
	h, _ := recbatch.Parse(res.Batches[0])
	if h.BaseOffset != 0 || h.LastOffset() != 0 || h.RecordCount != 0 {
		t.Fatalf("empty batch %+v", h)
	}
	res, _ = (&Cleaner{Map: m}).Clean(in, false)
	if len(res.Batches) != 0 {
		t.Fatalf("not the last: %d batches", len(res.Batches))
	}
}

// TestTombstoneRetention: a kept tombstone gets a delete horizon on its first clean and
// goes on the first clean at or after it (injected clock); older values of its key go at
// once.
func TestTombstoneRetention(t *testing.T) {
	in := [][]byte{
		mkBatch(t, 0, 0, -1, false, rec{key: "k", val: "v0"}, rec{key: "x", val: "x0"}),
		mkBatch(t, 2, 0, -1, false, rec{key: "k", tomb: true}),
		mkBatch(t, 3, 0, -1, false, rec{key: "y", val: "y0"}),
	}
	res, _ := clean(t, in, 1000, nil) // horizon 1100
	want := []survivor{{1, "x", "x0", false}, {2, "k", "", true}, {3, "y", "y0", false}}
	if got := survivors(t, res.Batches); !slices.Equal(got, want) {
		t.Fatalf("first clean %+v", got)
	}
	h, _ := recbatch.Parse(res.Batches[1])
	if hz, ok := h.DeleteHorizon(); !ok || hz != 1100 {
		t.Fatalf("horizon %d %v", hz, ok)
	}
	res2, _ := clean(t, res.Batches, 1099, nil)
	if got := survivors(t, res2.Batches); !slices.Equal(got, want) || res2.Changed {
		t.Fatalf("before the horizon %+v changed %v", got, res2.Changed)
	}
	res3, c := clean(t, res.Batches, 1100, nil)
	want = []survivor{{1, "x", "x0", false}, {3, "y", "y0", false}}
	if got := survivors(t, res3.Batches); !slices.Equal(got, want) || c.Stats.TombstonesRemoved != 1 {
		t.Fatalf("at the horizon %+v stats %+v", got, c.Stats)
	}
}

// TestAbortedTransactionRemoved: an aborted transaction's batches go and never supersede
// a committed value; its marker stays until the horizon passed, then goes with its entry;
// a committed transaction's data stays and supersedes.
func TestAbortedTransactionRemoved(t *testing.T) {
	in := [][]byte{
		mkBatch(t, 0, 0, -1, false, rec{key: "a", val: "a0"}, rec{key: "b", val: "b0"}),
		mkBatch(t, 2, 0, 7, true, rec{key: "a", val: "aborted"}), // producer 7, aborted at 4
		mkBatch(t, 3, 0, 8, true, rec{key: "b", val: "b-committed"}),
		mkMarker(4, 7, false),
		mkMarker(5, 8, true),
		mkBatch(t, 6, 0, -1, false, rec{key: "z", val: "z0"}),
	}
	aborted := []metadata.AbortedTxn{{ProducerID: 7, First: 2, Last: 4}}
	res, c := clean(t, in, 1000, aborted)
	want := []survivor{{0, "a", "a0", false}, {3, "b", "b-committed", false}, {6, "z", "z0", false}}
	if got := survivors(t, res.Batches); !slices.Equal(got, want) || c.Stats.AbortedBatchesGone != 1 {
		t.Fatalf("survivors %+v stats %+v", got, c.Stats)
	}
	if len(res.DroppedMarkers) != 0 || len(res.Batches) != 5 {
		t.Fatalf("markers dropped before their horizon: %v (%d batches)", res.DroppedMarkers, len(res.Batches))
	}
	// After the horizon: the abort marker goes (no data of it left), the commit marker
	// stays (its transaction's data is kept).
	res2, _ := clean(t, res.Batches, 1100, aborted)
	if !res2.DroppedMarkers[4] || res2.DroppedMarkers[5] || len(res2.DroppedMarkers) != 1 {
		t.Fatalf("dropped markers %v", res2.DroppedMarkers)
	}
	if got := survivors(t, res2.Batches); !slices.Equal(got, want) {
		t.Fatalf("after the horizon %+v", got)
	}
}

// TestCompressedBatches: compressed batches are filtered and compressed again with their
// codec (gzip, snappy, lz4, zstd), CRCs right.
func TestCompressedBatches(t *testing.T) {
	for codec := int16(1); codec <= 4; codec++ {
		t.Run(fmt.Sprint("codec", codec), func(t *testing.T) {
			in := [][]byte{
				mkBatch(t, 10, codec, -1, false, rec{key: "a", val: "a0"}, rec{key: "b", val: "b0"}, rec{key: "a", val: "a1"}),
				mkBatch(t, 13, codec, -1, false, rec{key: "b", val: "b1"}, rec{key: "c", val: "c0"}),
			}
			res, _ := clean(t, in, 0, nil)
			want := []survivor{{12, "a", "a1", false}, {13, "b", "b1", false}, {14, "c", "c0", false}}
			if got := survivors(t, res.Batches); !slices.Equal(got, want) {
				t.Fatalf("survivors %+v", got)
			}
			for _, b := range res.Batches {
				h, _ := recbatch.Parse(b)
				if h.Attributes&7 != codec {
					t.Fatalf("codec %d, want %d", h.Attributes&7, codec)
				}
			}
		})
	}
}

// TestOffsetMapBound: Full reports the bound.
func TestOffsetMapBound(t *testing.T) {
	m := NewOffsetMap(2)
	if err := m.Add(mkBatch(t, 0, 0, -1, false, rec{key: "a", val: "1"}, rec{key: "b", val: "2"}, rec{key: "c", val: "3"}), nil, 0); err != nil {
		t.Fatal(err)
	}
	if !m.Full() || m.Len() != 3 || m.End != 3 {
		t.Fatalf("len %d full %v end %d", m.Len(), m.Full(), m.End)
	}
}
