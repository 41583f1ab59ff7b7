package recbatch

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMarkerRoundTrip: a marker encodes as Kafka's control batch (attributes, producer,
// the control record franz-go's kmsg decodes) and decodes back; data batches are not
// markers.
func TestMarkerRoundTrip(t *testing.T) {
	for _, m := range []Marker{{ProducerID: 7, ProducerEpoch: 3, Commit: true, CoordinatorEpoch: 5}, {ProducerID: 1 << 40, ProducerEpoch: 0, Commit: false, CoordinatorEpoch: 0}} {
		b := EncodeMarker(m, 1234)
		h, err := Parse(b)
		if err != nil || !CRCOK(b) {
			t.Fatalf("%+v: %v (crc ok %v)", m, err, CRCOK(b))
		}
		if !h.Control() || !h.Transactional() || h.ProducerID != m.ProducerID || h.ProducerEpoch != m.ProducerEpoch || h.BaseSequence != -1 || h.RecordCount != 1 {
			t.Fatalf("%+v: header %+v", m, h)
		}
		// Kafka's own decoding of the control record key.
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		got, err := ParseMarker(b)
		if err != nil || got != m {
			t.Fatalf("parsed %+v %v, want %+v", got, err, m)
		}
	}
	data := EncodeSingle([]byte("k"), []byte("v"), 1)
	if _, err := ParseMarker(data); !errors.Is(err, ErrNotMarker) {
		t.Fatalf("a data batch as a marker: %v", err)
	}
}
