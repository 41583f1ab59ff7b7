package partlog

import (
	"testing"

	"github.com/weir-io/weir/metadata"
)

// TestStorageAndProducers: Storage counts, per WAL directory, the synced bytes not in
// object storage (an upload takes its batches out), and Producers lists each idempotent
// producer's epoch, last sequence and last batch's offset.
func TestStorageAndProducers(t *testing.T) {
	p := ready(t)
	own := SourceID{Broker: 3, Epoch: 7}
	log := &memLog{}
	p.UseOwn(log, own)
	if st := p.Storage(); len(st.WAL) != 0 || st.Uploaded != -1 {
		t.Fatalf("empty partition: %+v", st)
	}
	if _, err := appendSynced(t, p, log, 5, 0, 0, 2); err != nil { // offsets 0-1
		t.Fatal(err)
	}
	first := int64(len(log.b))
	if _, err := appendSynced(t, p, log, 9, 1, 0, 3); err != nil { // offsets 2-4
		t.Fatal(err)
	}
	if _, err := appendSynced(t, p, log, 5, 0, 2, 1); err != nil { // offset 5
		t.Fatal(err)
	}
	st := p.Storage()
	if len(st.WAL) != 1 || st.WAL[own] != int64(len(log.b)) {
		t.Fatalf("storage %+v, want %d bytes in %v", st, len(log.b), own)
	}
	p.MarkUploaded(NewTierObj(metadata.ObjectRange{Object: 1, FirstOffset: 0, LastOffset: 1}, "k", first), log)
	if st := p.Storage(); st.Uploaded != 2 || st.WAL[own] != int64(len(log.b))-first {
		t.Fatalf("after uploading offsets 0-1: %+v, want uploaded 2 and %d bytes", st, int64(len(log.b))-first)
	}
	got := p.Producers()
	want := []ProducerInfo{{ID: 5, Epoch: 0, LastSequence: 2, LastOffset: 5}, {ID: 9, Epoch: 1, LastSequence: 2, LastOffset: 2}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("producers %+v, want %+v", got, want)
	}
}
