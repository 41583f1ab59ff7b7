package recbatch

import (
	"errors"
	"testing"

	"github.com/weir-io/weir/internal/kafkatest"
)

// TestValidateProduceTransactional: transactional batches are refused by default and
// accepted with the rule on, if they carry a producer ID; markers never.
func TestValidateProduceTransactional(t *testing.T) {
	txn := kafkatest.TxnBatch(4, 1, 0, []byte("a"))
	if _, err := ValidateProduce(txn, 0); !errors.Is(err, ErrTransactional) {
		t.Fatalf("default: %v", err)
	}
	if _, err := ValidateProduceWith(txn, ProduceRules{}); !errors.Is(err, ErrTransactional) {
		t.Fatalf("zero rules: %v", err)
	}
	on := ProduceRules{Transactional: true}
	if h, err := ValidateProduceWith(txn, on); err != nil || !h.Transactional() || h.ProducerID != 4 {
		t.Fatalf("rule on: %+v %v", h, err)
	}
	if _, err := ValidateProduceWith(kafkatest.TxnBatch(-1, -1, -1, []byte("a")), on); !errors.Is(err, ErrInvalid) {
		t.Fatalf("transactional batch without a producer: %v", err)
	}
	if _, err := ValidateProduceWith(EncodeMarker(Marker{ProducerID: 4, ProducerEpoch: 1}, 1), on); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a marker from a client: %v", err)
	}
	if _, err := ValidateProduceWith(txn, ProduceRules{MaxBytes: 10, Transactional: true}); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("max bytes with the rule on: %v", err)
	}
}

// TestBelowAndLastOffset: a read is cut before the first batch at or past the end, and
// the last offset is the last whole batch's; a torn tail is left alone.
func TestBelowAndLastOffset(t *testing.T) {
	var b []byte
	var starts []int
	for i, n := range []int{2, 1, 3} { // offsets [0,1] [2] [3,5]
		batch := kafkatest.Batch(-1, -1, -1, make([][]byte, n)...)
		SetOffsetEpoch(batch, []int64{0, 2, 3}[i], 0)
		starts = append(starts, len(b))
		b = append(b, batch...)
	}
	for _, c := range []struct {
		end  int64
		n    int // bytes kept
		last int64
	}{{0, 0, -1}, {1, starts[1], 1}, {2, starts[1], 1}, {3, starts[2], 2}, {4, len(b), 5}, {100, len(b), 5}} {
		got := Below(b, c.end)
		if len(got) != c.n || LastOffsetOf(got) != c.last {
			t.Fatalf("below %d: %d bytes, last %d; want %d, %d", c.end, len(got), LastOffsetOf(got), c.n, c.last)
		}
	}
	torn := b[:len(b)-1]
	if got := Below(torn, 100); len(got) != len(torn) || LastOffsetOf(torn) != 2 {
		t.Fatalf("torn tail: %d bytes, last %d", len(got), LastOffsetOf(torn))
	}
	if LastOffsetOf(nil) != -1 || len(Below(nil, 5)) != 0 {
		t.Fatal("empty read")
	}
}
