package peer

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
)

func TestWireRoundTrips(t *testing.T) {
	lr := LinkRequest{Proxy: 3, ProxyEpoch: 9, Session: 1<<40 + 5, Links: []partlog.Link{
		{Topic: metadata.TopicID{1}, Partition: 2, Proxy: 3, ProxyEpoch: 9, Pos: 100, Size: 80, CRC: 7, LastOffsetDelta: 4, MaxTimestamp: 5, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Base: -1, LeaderEpoch: -1},
		{Topic: metadata.TopicID{2}, Partition: 0, Proxy: 3, ProxyEpoch: 9, Pos: 300, Size: 61, CRC: 8, ProducerID: 12, ProducerEpoch: 1, BaseSequence: 40, Base: -1, LeaderEpoch: -1},
		// A transactional link (v2) among v1 ones: each is read by its own version.
		{Topic: metadata.TopicID{2}, Partition: 1, Proxy: 3, ProxyEpoch: 9, Pos: 400, Size: 70, CRC: 9, ProducerID: 13, ProducerEpoch: 0, BaseSequence: 0, Attributes: recbatch.AttrTransactional, Base: -1, LeaderEpoch: -1},
		{Topic: metadata.TopicID{3}, Partition: 0, Proxy: 3, ProxyEpoch: 9, Pos: 500, Size: 61, CRC: 10, ProducerID: 14, ProducerEpoch: 0, BaseSequence: 0, Base: -1, LeaderEpoch: -1},
	}}
	enc := lr.AppendTo(nil)
	got, err := DecodeLinkRequest(enc)
	if err != nil || !reflect.DeepEqual(got, lr) {
		t.Fatalf("link request: %+v %v", got, err)
	}
	if len(enc) != linkRequestHdr+3*partlog.LinkLenV1+partlog.LinkLenV2 {
		t.Fatalf("link request of %d bytes: only the transactional link is v2", len(enc))
	}
	for _, bad := range [][]byte{enc[:len(enc)-1], append(slices.Clone(enc), 0)} {
		if _, err := DecodeLinkRequest(bad); err == nil {
			t.Fatalf("a link request of %d bytes (%d encoded) decoded", len(bad), len(enc))
		}
	}
	rs := []LinkResult{{Base: 10, LogStart: 0}, {Code: 45, Class: LinkRefused, Base: -1, LogStart: -1}, {Code: 6, Class: LinkMaybeLogged, Base: 20, LogStart: 0}}
	if got, err := DecodeLinkResults(AppendLinkResults(nil, rs), 3); err != nil || !reflect.DeepEqual(got, rs) {
		t.Fatalf("link results: %+v %v", got, err)
	}
	// A class that does not agree with its code is malformed: an error must never read
	// as acked, nor a maybe-logged answer lose its offsets.
	for _, bad := range []LinkResult{{Code: 6, Class: LinkAcked, Base: 1}, {Class: LinkRefused, Base: -1}, {Code: 6, Class: LinkMaybeLogged, Base: -1}, {Class: 7}} {
		if _, err := DecodeLinkResults(AppendLinkResults(nil, []LinkResult{bad}), 1); err == nil {
			t.Fatalf("link result %+v decoded", bad)
		}
	}
	fence := FenceRequest{Proxy: 3, Epoch: 9, Session: 4, Parts: []PartitionRef{{Topic: metadata.TopicID{4}, Partition: 1}}}
	if got, err := DecodeFenceRequest(fence.AppendTo(nil)); err != nil || !reflect.DeepEqual(got, fence) {
		t.Fatalf("fence request: %+v %v", got, err)
	}
	if _, err := DecodeLinkResults(AppendLinkResults(nil, rs), 2); err == nil {
		t.Fatal("link results for a different count decoded")
	}
	refs := []PartitionRef{{Topic: metadata.TopicID{4}, Partition: 1}}
	if got, err := DecodeOffsetsRequest(AppendOffsetsRequest(nil, refs)); err != nil || !reflect.DeepEqual(got, refs) {
		t.Fatalf("offsets request: %+v %v", got, err)
	}
	os := []Offsets{{HW: 5, LogStart: 1, LeaderEpoch: 2}}
	if got, err := DecodeOffsets(AppendOffsets(nil, os), 1); err != nil || !reflect.DeepEqual(got, os) {
		t.Fatalf("offsets: %+v %v", got, err)
	}
	fr := FollowRequest{Replica: 2, MaxWait: 500, Parts: []FollowPart{{Topic: metadata.TopicID{5}, Partition: 3, From: 77, LeaderEpoch: 4}}}
	if got, err := DecodeFollowRequest(fr.AppendTo(nil)); err != nil || !reflect.DeepEqual(got, fr) {
		t.Fatalf("follow request: %+v %v", got, err)
	}
	res := []FollowResult{
		{State: partlog.FollowState{LeaderEpoch: 4, HW: 90, LogStart: 3, Epochs: []partlog.EpochStart{{Epoch: 1, Start: 0}, {Epoch: 4, Start: 50}}, LSO: -1},
			Entries: []partlog.FollowEntry{{Base: 77, LastDelta: 2, Epoch: 4, MaxTS: 9, Size: 100, From: partlog.SourceID{Broker: 1, Epoch: 2}, Pos: 4096, CRC: 11}}},
		{Code: 6, Entries: []partlog.FollowEntry{}, State: partlog.FollowState{LSO: -1}},
	}
	if got, err := DecodeFollowResults(AppendFollowResults(nil, res, false), 2, false); err != nil || !reflect.DeepEqual(got, res) {
		t.Fatalf("follow results: %+v %v", got, err)
	}
	// OpFollowTxn: the last stable offset and the aborted transactions come along.
	frt := fr
	frt.Txn = true
	if b := frt.AppendTo(nil); b[0] != OpFollowTxn {
		t.Fatalf("txn follow request op %d", b[0])
	} else if got, err := DecodeFollowRequest(b); err != nil || !reflect.DeepEqual(got, frt) {
		t.Fatalf("txn follow request: %+v %v", got, err)
	}
	res[0].State.LSO, res[0].State.Aborted = 80, []metadata.AbortedTxn{{ProducerID: 7, First: 60, Last: 78}}
	res[1].State.LSO = 5
	if got, err := DecodeFollowResults(AppendFollowResults(nil, res, true), 2, true); err != nil || !reflect.DeepEqual(got, res) {
		t.Fatalf("txn follow results: %+v %v", got, err)
	}
	if _, err := DecodeFollowResults(AppendFollowResults(nil, res, true), 2, false); err == nil {
		t.Fatal("a txn follow answer decoded as a plain one")
	}
	if id, err := DecodeWake(AppendWake(nil, 7)); err != nil || id != 7 {
		t.Fatalf("wake: %d %v", id, err)
	}
}

// Fuzzing the decoders of what other brokers send: no input panics, and whatever
// decodes encodes back to the same bytes.
func FuzzDecoders(f *testing.F) {
	lr := LinkRequest{Proxy: 3, ProxyEpoch: 9, Links: []partlog.Link{{Topic: metadata.TopicID{1}, Proxy: 3, ProxyEpoch: 9, Size: 80}}}
	f.Add(lr.AppendTo(nil))
	txl := LinkRequest{Proxy: 3, ProxyEpoch: 9, Links: []partlog.Link{{Topic: metadata.TopicID{1}, Proxy: 3, ProxyEpoch: 9, Size: 80, ProducerID: 4, Attributes: recbatch.AttrTransactional}}}
	f.Add(txl.AppendTo(nil))
	f.Add(AppendLinkResults(nil, []LinkResult{{Base: 1}}))
	f.Add(AppendOffsetsRequest(nil, []PartitionRef{{Partition: 1}}))
	fr := FollowRequest{Replica: 2, Parts: []FollowPart{{Partition: 3}}}
	f.Add(fr.AppendTo(nil))
	f.Add(AppendFollowResults(nil, []FollowResult{{Entries: []partlog.FollowEntry{{Size: 100}}}}, false))
	f.Add(AppendFollowResults(nil, []FollowResult{{State: partlog.FollowState{LSO: 3, Aborted: []metadata.AbortedTxn{{ProducerID: 1, First: 2, Last: 3}}}}}, true))
	f.Add(AppendWake(nil, 1))
	fence := FenceRequest{Proxy: 3, Epoch: 9, Session: 2, Parts: []PartitionRef{{Partition: 1}}}
	f.Add(fence.AppendTo(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := DecodeFenceRequest(b); err == nil && string(r.AppendTo(nil)) != string(b) {
			t.Fatal("fence request re-encodes differently")
		}
		if r, err := DecodeLinkRequest(b); err == nil {
			if got := r.AppendTo(nil); string(got) != string(b) {
				t.Fatalf("link request re-encodes differently")
			}
		}
		if len(b) >= 4 {
			n := int(binary.BigEndian.Uint32(b))
			if n >= 0 && n < 1<<16 {
				if rs, err := DecodeLinkResults(b, n); err == nil && string(AppendLinkResults(nil, rs)) != string(b) {
					t.Fatal("link results re-encode differently")
				}
				if os, err := DecodeOffsets(b, n); err == nil && string(AppendOffsets(nil, os)) != string(b) {
					t.Fatal("offsets re-encode differently")
				}
				for _, txn := range []bool{false, true} {
					if rs, err := DecodeFollowResults(b, n, txn); err == nil && string(AppendFollowResults(nil, rs, txn)) != string(b) {
						t.Fatal("follow results re-encode differently")
					}
				}
			}
		}
		if ps, err := DecodeOffsetsRequest(b); err == nil && string(AppendOffsetsRequest(nil, ps)) != string(b) {
			t.Fatal("offsets request re-encodes differently")
		}
		if r, err := DecodeFollowRequest(b); err == nil && string(r.AppendTo(nil)) != string(b) {
			t.Fatal("follow request re-encodes differently")
		}
		_, _ = DecodeWake(b)
	})
}

// echoServer answers each request frame with its body reversed after delay, in order,
// or closes the connection after closeAfter requests (0: never).
func echoServer(t *testing.T, delay time.Duration, closeAfter int) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				r := bufio.NewReader(nc)
				for n := 1; ; n++ {
					var size [4]byte
					if _, err := io.ReadFull(r, size[:]); err != nil {
						return
					}
					frame := make([]byte, binary.BigEndian.Uint32(size[:]))
					if _, err := io.ReadFull(r, frame); err != nil {
						return
					}
					if closeAfter > 0 && n == closeAfter {
						return
					}
					corr := frame[4:8]
					idLen := int(binary.BigEndian.Uint16(frame[8:]))
					body := frame[10+idLen:]
					time.Sleep(delay) // on purpose: the fake server's injected latency
					out := binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))
					out = append(out, corr...)
					for i := len(body) - 1; i >= 0; i-- {
						out = append(out, body[i])
					}
					nc.Write(out)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestClientPipelinesInOrder(t *testing.T) {
	c := NewClient(echoServer(t, time.Millisecond, 0), DefaultConfig())
	defer c.Close()
	got := make(chan string, 100)
	for i := 0; i < 100; i++ {
		body := []byte{byte(i), 'x'}
		c.Do(body, func(resp []byte, err error) {
			if err != nil {
				t.Error(err)
			}
			got <- string(resp)
		})
	}
	for i := 0; i < 100; i++ {
		if r := <-got; r != string([]byte{'x', byte(i)}) {
			t.Fatalf("answer %d: %q", i, r)
		}
	}
}

func TestClientFailures(t *testing.T) {
	// Nothing listens: the request was never sent.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	c := NewClient(addr, DefaultConfig())
	if _, err := c.Call(context.Background(), []byte{1}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("no listener: %v, want ErrUnavailable", err)
	}
	c.Close()
	// The peer closes the connection with requests in flight: their outcome is unknown.
	c = NewClient(echoServer(t, 0, 2), DefaultConfig())
	if _, err := c.Call(context.Background(), []byte{1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(context.Background(), []byte{2}); !errors.Is(err, ErrLost) {
		t.Fatalf("connection closed under a request: %v, want ErrLost", err)
	}
	// The next request reconnects.
	if r, err := c.Call(context.Background(), []byte{3, 4}); err != nil || string(r) != "\x04\x03" {
		t.Fatalf("after a reconnect: %q %v", r, err)
	}
	c.Close()
	// An answer that takes longer than the timeout is lost.
	cfg := DefaultConfig()
	cfg.Timeout = 100 * time.Millisecond
	c = NewClient(echoServer(t, time.Second, 0), cfg)
	defer c.Close()
	if _, err := c.Call(context.Background(), []byte{1}); !errors.Is(err, ErrLost) {
		t.Fatalf("slow answer: %v, want ErrLost", err)
	}
}
