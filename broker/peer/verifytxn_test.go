package peer

import (
	"errors"
	"reflect"
	"testing"
)

func TestVerifyTxnRoundTrip(t *testing.T) {
	r := VerifyTxnRequest{TransactionalID: "app-1", ProducerID: 1 << 40, ProducerEpoch: 7, Topic: "orders", Partition: 41}
	b := r.AppendTo(nil)
	got, err := DecodeVerifyTxnRequest(b)
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip: %+v %v, want %+v", got, err, r)
	}
	for _, bad := range [][]byte{b[:len(b)-1], append(append([]byte{}, b...), 0), {OpVerifyTxn}, append([]byte{OpMarkers}, b[1:]...)} {
		if _, err := DecodeVerifyTxnRequest(bad); !errors.Is(err, ErrMalformed) {
			t.Fatalf("malformed request of %d bytes accepted: %v", len(bad), err)
		}
	}
	if code, known, err := DecodeVerifyTxnAnswer(AppendVerifyTxnAnswer(nil, 120)); code != 120 || !known || err != nil {
		t.Fatalf("answer: %d %v %v", code, known, err)
	}
	if _, known, err := DecodeVerifyTxnAnswer(nil); known || err != nil {
		t.Fatalf("an empty answer (an older broker) must read as unknown: %v %v", known, err)
	}
	if _, _, err := DecodeVerifyTxnAnswer([]byte{0}); !errors.Is(err, ErrMalformed) {
		t.Fatal("short answer accepted")
	}
}

func FuzzDecodeVerifyTxnRequest(f *testing.F) {
	f.Add((&VerifyTxnRequest{TransactionalID: "x", ProducerID: 1, Topic: "t", Partition: 2}).AppendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeVerifyTxnRequest(b)
		if err == nil && !reflect.DeepEqual(r.AppendTo(nil), b) {
			t.Fatalf("decoded %x to %+v, which encodes differently", b, r)
		}
	})
}
