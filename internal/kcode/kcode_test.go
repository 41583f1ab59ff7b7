package kcode

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestCodesAreKafkas: every constant is the code of the error Kafka names so.
func TestCodesAreKafkas(t *testing.T) {
	for _, c := range []struct {
		got  int16
		want *kerr.Error
	}{
		{OffsetOutOfRange, kerr.OffsetOutOfRange},
		{NotLeaderOrFollower, kerr.NotLeaderForPartition},
		{RequestTimedOut, kerr.RequestTimedOut},
		{OutOfOrderSequenceNumber, kerr.OutOfOrderSequenceNumber},
		{InvalidProducerEpoch, kerr.InvalidProducerEpoch},
		{InvalidTxnState, kerr.InvalidTxnState},
		{InvalidRecord, kerr.InvalidRecord},
		{KafkaStorageError, kerr.KafkaStorageError},
		{FencedLeaderEpoch, kerr.FencedLeaderEpoch},
		{UnknownLeaderEpoch, kerr.UnknownLeaderEpoch},
	} {
		if c.got != c.want.Code {
			t.Errorf("%s: %d, want %d", c.want.Message, c.got, c.want.Code)
		}
	}
}

// TestWalk: codes come in errors.Is order, through %w chains and joined errors, and a
// sentinel stays itself for errors.Is.
func TestWalk(t *testing.T) {
	a, b, c := New("a", 1), New("b", 6), New("c", 56)
	err := fmt.Errorf("x: %w", errors.Join(fmt.Errorf("%w: %w", c, a), errors.New("plain"), b))
	var got []int16
	if Walk(err, func(code int16) bool { got = append(got, code); return true }) {
		t.Fatal("Walk reported a stop fn did not ask for")
	}
	if want := []int16{56, 1, 6}; !slices.Equal(got, want) {
		t.Fatalf("codes %v, want %v", got, want)
	}
	got = nil
	if !Walk(err, func(code int16) bool { got = append(got, code); return code != 1 }) || !slices.Equal(got, []int16{56, 1}) {
		t.Fatalf("stopped walk: %v", got)
	}
	if !errors.Is(err, a) || errors.Is(err, New("a", 1)) || a.Error() != "a" {
		t.Fatal("sentinel identity")
	}
	if Walk(errors.New("plain"), func(int16) bool { return false }) || Walk(nil, func(int16) bool { return false }) {
		t.Fatal("Walk found a code in an error without one")
	}
}

// NewWaitable's errors carry their code and are told apart from New's, through wrapping.
func TestWaitsOut(t *testing.T) {
	w, n := NewWaitable("behind", OffsetOutOfRange), New("out", OffsetOutOfRange)
	if !WaitsOut(fmt.Errorf("read: %w", w)) || WaitsOut(n) || WaitsOut(nil) {
		t.Fatal("WaitsOut does not tell a waitable error from a plain one")
	}
	var got int16
	Walk(fmt.Errorf("read: %w", w), func(c int16) bool { got = c; return false })
	if got != OffsetOutOfRange {
		t.Fatalf("a waitable error's code: %d", got)
	}
}
