package peer

import (
	"errors"
	"reflect"
	"testing"

	"github.com/weir-io/weir/metadata"
)

func TestMarkersRoundTrip(t *testing.T) {
	r := MarkersRequest{ProducerID: 1 << 40, ProducerEpoch: 7, Commit: true, CoordinatorEpoch: 3,
		Parts: []PartitionRef{{metadata.TopicID{1, 2}, 0}, {metadata.TopicID{9}, 41}}}
	b := r.AppendTo(nil)
	got, err := DecodeMarkersRequest(b)
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip: %+v %v, want %+v", got, err, r)
	}
	for _, bad := range [][]byte{b[:len(b)-1], append(append([]byte{}, b...), 0), {OpMarkers}, append([]byte{OpLink}, b[1:]...)} {
		if _, err := DecodeMarkersRequest(bad); !errors.Is(err, ErrMalformed) {
			t.Fatalf("malformed request of %d bytes accepted: %v", len(bad), err)
		}
	}
	codes, err := DecodeMarkersAnswer(AppendMarkersAnswer(nil, []int16{0, 6, -1}), 3)
	if err != nil || !reflect.DeepEqual(codes, []int16{0, 6, -1}) {
		t.Fatalf("answer: %v %v", codes, err)
	}
	if _, err := DecodeMarkersAnswer([]byte{0}, 1); !errors.Is(err, ErrMalformed) {
		t.Fatal("short answer accepted")
	}
}

func FuzzDecodeMarkersRequest(f *testing.F) {
	f.Add((&MarkersRequest{ProducerID: 1, Parts: []PartitionRef{{metadata.TopicID{1}, 2}}}).AppendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeMarkersRequest(b)
		if err == nil && !reflect.DeepEqual(r.AppendTo(nil), b) {
			t.Fatalf("decoded %x to %+v, which encodes differently", b, r)
		}
	})
}
