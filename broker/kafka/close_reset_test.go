package kafka

import (
	"errors"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A connection whose requests were never answered (ApiVersions aside) is reset when the
// server closes (a fenced broker starting again), so the client reads ECONNRESET, which
// franz-go retries, not an end of stream on its first read, which it does not
// (ErrFirstReadEOF). A connection that had an answer still ends with a FIN.
func TestCloseResetsUnansweredConnections(t *testing.T) {
	s, _ := startServer(t)
	longPoll := func() *kmsg.FetchRequest {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 4
		req.ReplicaID = -1
		req.MaxWaitMillis = 60_000 // answered only by Close
		req.MinBytes = 1 << 20
		req.MaxBytes = 1 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset = 0
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	fresh := dialRaw(t, s)
	fresh.send(1, longPoll())

	// ApiVersions alone does not make a connection answered: franz-go sends it on every
	// new connection and counts only what follows.
	setUp := dialRaw(t, s)
	setUp.send(1, kmsg.NewPtrApiVersionsRequest())
	if _, _, err := setUp.recv(10 * time.Second); err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	setUp.send(2, longPoll())

	answered := dialRaw(t, s)
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 4
	answered.send(1, md)
	if _, _, err := answered.recv(10 * time.Second); err != nil {
		t.Fatalf("Metadata: %v", err)
	}
	answered.send(2, longPoll())

	// Both long polls are read and waiting once no answer comes for a moment.
	if _, _, err := fresh.recv(300 * time.Millisecond); !isTimeout(err) {
		t.Fatalf("the long poll was answered before Close: %v", err)
	}
	s.Close()
	if _, _, err := fresh.recv(10 * time.Second); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("unanswered connection at Close: %v, want connection reset", err)
	}
	if _, _, err := setUp.recv(10 * time.Second); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("connection with only ApiVersions answered at Close: %v, want connection reset", err)
	}
	if _, _, err := answered.recv(10 * time.Second); !errors.Is(err, io.EOF) {
		t.Fatalf("answered connection at Close: %v, want EOF", err)
	}
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}
