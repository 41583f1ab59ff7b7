package peer

import (
	"errors"
	"testing"
	"time"
)

// An OpMoveReady request decodes to what was encoded; a truncated one is malformed.
func TestMoveReadyRequestRoundTrip(t *testing.T) {
	in := MoveReadyRequest{Part: PartitionRef{Partition: 42}, Gen: 1<<40 + 7, Wait: 10 * time.Second}
	copy(in.Part.Topic[:], "0123456789abcdef")
	b := in.AppendTo(nil)
	out, err := DecodeMoveReadyRequest(b)
	if err != nil || out != in {
		t.Fatalf("decoded %+v, %v; want %+v", out, err, in)
	}
	if _, err := DecodeMoveReadyRequest(b[:len(b)-1]); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a truncated request: %v", err)
	}
}
