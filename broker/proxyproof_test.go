package broker

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/broker/peer"
	"github.com/weir-io/weir/broker/tier"
	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore/localfs"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

// proofBroker is a standalone broker (on a leasedStore) with the object tier on a local
// store, its WAL on a FaultFS, leading partition 0 of topic "zoned". The tests make it
// its own zone proxy: a proxied batch goes in its WAL exactly as a proxy writes one, and
// its link reaches it over real TCP (peer), so the leader's side runs as for another
// broker's links and the proxy's side (answers, pins, session fences) as for its own.
type proofBroker struct {
	*Broker
	store *leasedStore
	fs    *waltest.FaultFS
	topic *metadata.Topic
	part  *partlog.Partition
}

func startProofBroker(t *testing.T, uploadDelay time.Duration) *proofBroker {
	t.Helper()
	dir := t.TempDir()
	fs := waltest.NewFaultFS(wal.OSFS())
	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.DataDir, cfg.Logger = "127.0.0.1:0", dir, discardLogger()
	cfg.WAL.FS = fs
	cfg.LinkGrace = 600 * time.Millisecond // resolveLostLoop runs every 100 ms
	cfg.TailCacheBytes = 0                 // reads and uploads of linked batches go to the WAL's copy
	objs, err := localfs.Open(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Objects = objs
	cfg.Tier.MaxUploadDelay = uploadDelay
	cfg.Tier.CheckInterval = 20 * time.Millisecond
	local, err := metadata.OpenLocal(metadata.LocalConfig{Path: filepath.Join(dir, "metadata.json"), Self: metadata.Broker{ID: 0}})
	if err != nil {
		t.Fatal(err)
	}
	store := &leasedStore{leaseOnly{LocalStore: local}}
	store.valid.Store(true)
	b, err := New(cfg, store)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	createTopic(t, kadm.NewClient(clientFor(t, b)), "zoned", 1, nil)
	pb := &proofBroker{Broker: b, store: store, fs: fs, topic: b.meta.View().Topics["zoned"]}
	testutil.Eventually(t, 30*time.Second, "partition ready", func() bool {
		pb.part = b.parts.Get(pb.topic.ID, 0)
		return pb.part != nil && pb.part.State() == partlog.Ready
	})
	return pb
}

// proxied writes batch to the WAL as a zone proxy does (a synced RecProxyBatch), pins
// it, and returns its link.
func (pb *proofBroker) proxied(t *testing.T, batch []byte) (partlog.Link, *tier.ProxyPin) {
	t.Helper()
	h, err := recbatch.ValidateProduce(batch, 0)
	if err != nil {
		t.Fatal(err)
	}
	payload := partlog.EncodeBatchRec(pb.topic.ID, 0, batch)
	pos, err := pb.wal.AppendSync(testCtx(t), partlog.RecProxyBatch, payload)
	if err != nil {
		t.Fatal(err)
	}
	l, err := partlog.LinkOf(pb.topic.ID, 0, pb.cfg.NodeID, pb.epoch, pos+partlog.BatchRecHdr, &h, payload[partlog.BatchRecHdr:])
	if err != nil {
		t.Fatal(err)
	}
	return l, pb.tier.PinProxied(l.Key(), pos)
}

type linkAnswer struct {
	rs  []peer.LinkResult
	err error
}

// send sends links on session over c (a connection of its own, as a link sender's).
func (pb *proofBroker) send(c *peer.Client, session uint64, links ...partlog.Link) <-chan linkAnswer {
	ch := make(chan linkAnswer, 1)
	req := peer.LinkRequest{Proxy: pb.cfg.NodeID, ProxyEpoch: pb.epoch, Session: session, Links: links}
	c.Do(req.AppendTo(nil), func(resp []byte, err error) {
		var rs []peer.LinkResult
		if err == nil {
			rs, err = peer.DecodeLinkResults(resp, len(links))
		}
		ch <- linkAnswer{rs, err}
	})
	return ch
}

func (pb *proofBroker) peerClient(t *testing.T) *peer.Client {
	c := peer.NewClient(pb.Addr().String(), peer.DefaultConfig())
	t.Cleanup(c.Close)
	return c
}

// answer runs the proxy's handling of a link's answer and returns what the client gets.
func (pb *proofBroker) answer(l partlog.Link, pin *tier.ProxyPin, res peer.LinkResult, err error) kafka.AppendResult {
	var out kafka.AppendResult
	proxyWriter{b: pb.Broker, t: pb.topic, index: 0, leader: pb.cfg.NodeID}.answered(l, pin, res, err, -1, time.Now(), func(r kafka.AppendResult) { out = r })
	return out
}

func (pb *proofBroker) next() int64 {
	_, next, _ := pb.part.Progress()
	return next
}

func (pb *proofBroker) uploaded() int64 {
	return pb.meta.View().Topics["zoned"].Partitions[0].UploadedThrough()
}

// wantPinHeld fails unless the pin is held, waiting for end.
func wantPinHeld(t *testing.T, pb *proofBroker, pin *tier.ProxyPin, end int64, what string) {
	t.Helper()
	got, released := pb.tier.PinEnd(pin)
	if released || got != end || pb.ProxyPinsHeld() < 1 {
		t.Fatalf("%s: pin end %d released %v (%d held), want held until the manifest reaches %d", what, got, released, pb.ProxyPinsHeld(), end)
	}
}

// An acked link keeps the proxy's copy until the upload covers it: releasing the pin on
// the leader's answer would let the WAL trim the only copy of a batch the leader still
// reads from there.
func TestProxyPinHeldUntilUploadNotAnswer(t *testing.T) {
	pb := startProofBroker(t, 2*time.Second)
	l, pin := pb.proxied(t, makeBatch(-1, -1, -1, []byte("a"), []byte("b")))
	a := <-pb.send(pb.peerClient(t), 1, l)
	if a.err != nil || a.rs[0].Class != peer.LinkAcked || a.rs[0].Base != 0 {
		t.Fatalf("link answer %+v %v", a.rs, a.err)
	}
	if r := pb.answer(l, pin, a.rs[0], nil); r.Err != nil || r.Base != 0 {
		t.Fatalf("client answer %+v", r)
	}
	if pb.uploaded() < 2 {
		wantPinHeld(t, pb, pin, 2, "acked, not uploaded")
	}
	testutil.Eventually(t, 60*time.Second, "the upload covers the batch and the pin goes", func() bool { return pb.ProxyPinsHeld() == 0 })
	if up := pb.uploaded(); up < 2 {
		t.Fatalf("pin released with the manifest at %d, below the batch's end 2", up)
	}
}

// The leader's lease lapses while the link's group is synced: the link is durable in
// its log but not acked. The answer says so (maybe logged, with its offsets), the client
// gets an error, and the proxy keeps its copy until an upload covers those offsets (it
// used to release it on any error code).
func TestProxyPinKeptWhenLeaseLapsesDuringLinkSync(t *testing.T) {
	pb := startProofBroker(t, time.Hour)
	l, pin := pb.proxied(t, makeBatch(-1, -1, -1, []byte("a")))
	var lapsed atomic.Bool
	pb.fs.SetHook(func(op waltest.Op, name string, _ int64, _ int) error {
		if op == waltest.OpSync && filepath.Ext(name) == ".wal" && !lapsed.Load() {
			lapsed.Store(true)
			pb.store.valid.Store(false) // the lease runs out during this sync
		}
		return nil
	})
	a := <-pb.send(pb.peerClient(t), 1, l)
	pb.fs.SetHook(nil)
	if a.err != nil || a.rs[0].Class != peer.LinkMaybeLogged || a.rs[0].Base != 0 || a.rs[0].Code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("link answer %+v %v, want NOT_LEADER maybe logged at 0", a.rs, a.err)
	}
	if r := pb.answer(l, pin, a.rs[0], nil); r.Err == nil {
		t.Fatalf("client acked without the leader's ack: %+v", r)
	}
	wantPinHeld(t, pb, pin, 1, "durable, not acked")
	time.Sleep(300 * time.Millisecond) // on purpose: trim and fence rounds run meanwhile
	wantPinHeld(t, pb, pin, 1, "durable, not acked, later")
}

// A link whose batch does not read back from the proxy's WAL (bytes not matching the
// link, a directory the leader cannot find) is refused before it gets offsets, never
// committed and acked (reads of it would fail for good); the proxy may then release it.
func TestLinkToUnreadableBatchRefused(t *testing.T) {
	pb := startProofBroker(t, time.Hour)
	c := pb.peerClient(t)
	for _, tc := range []struct {
		name   string
		break_ func(*partlog.Link)
	}{
		{"bytes not matching the link", func(l *partlog.Link) { l.CRC ^= 1 }},
		{"a WAL directory that is not there", func(l *partlog.Link) { l.ProxyEpoch += 7 }},
	} {
		l, pin := pb.proxied(t, makeBatch(-1, -1, -1, []byte(tc.name)))
		tc.break_(&l)
		req := peer.LinkRequest{Proxy: pb.cfg.NodeID, ProxyEpoch: l.ProxyEpoch, Session: 1, Links: []partlog.Link{l}}
		resp, err := c.Call(testCtx(t), req.AppendTo(nil))
		if err != nil {
			t.Fatal(err)
		}
		rs, err := peer.DecodeLinkResults(resp, 1)
		if err != nil || rs[0].Class != peer.LinkRefused || rs[0].Code != kerr.KafkaStorageError.Code {
			t.Fatalf("%s: answer %+v %v, want refused with KAFKA_STORAGE_ERROR", tc.name, rs, err)
		}
		if r := pb.answer(l, pin, rs[0], nil); r.Err == nil {
			t.Fatalf("%s: acked", tc.name)
		}
		if pb.next() != 0 {
			t.Fatalf("%s: the log grew to %d", tc.name, pb.next())
		}
		if pb.ProxyPinsHeld() != 0 {
			t.Fatalf("%s: a refused link's pin is held", tc.name)
		}
	}
}

// stallWrites blocks WAL writes until the returned function is called (with the error
// the blocked writes then fail with, nil: none); a test that fails first releases them
// on cleanup, so the broker can close.
func stallWrites(t *testing.T, pb *proofBroker, op waltest.Op) (release func(error), blocked func() bool) {
	ch := make(chan struct{})
	var once sync.Once
	var n atomic.Int32
	t.Cleanup(func() { once.Do(func() { close(ch) }) })
	var after atomic.Value
	pb.fs.SetHook(func(o waltest.Op, name string, _ int64, _ int) error {
		if o == op && filepath.Ext(name) == ".wal" {
			n.Add(1)
			<-ch
			if err, _ := after.Load().(error); err != nil {
				return err
			}
		}
		return nil
	})
	return func(err error) {
		if err != nil {
			after.Store(err)
		}
		once.Do(func() { close(ch) })
	}, func() bool { return n.Load() > 0 }
}

// The link's answer is lost while the link waits behind a slow WAL write at the leader,
// to be applied later. The pin is not let go on a guess (the leader's high watermark
// after a grace, below the stale link): it waits for the session fence, whose log end
// covers the link once applied. The client's retry is then acked as a duplicate of the
// original, whose bytes are still in the WAL, and the acked record reads back.
func TestLostLinkPinWaitsForSessionFence(t *testing.T) {
	pb := startProofBroker(t, time.Hour)
	batch := makeBatch(5, 0, 0, []byte("only copy"))
	l, pin := pb.proxied(t, batch)
	release, blocked := stallWrites(t, pb, waltest.OpWrite)
	c := pb.peerClient(t)
	ch := pb.send(c, 0, l)
	testutil.Eventually(t, 30*time.Second, "the link is prepared, its write stalled", func() bool { return pb.next() == 1 && blocked() })
	c.Close() // the answer is lost
	a := <-ch
	if !errors.Is(a.err, peer.ErrLost) {
		t.Fatalf("answer %+v %v, want lost", a.rs, a.err)
	}
	if r := pb.answer(l, pin, peer.LinkResult{}, a.err); r.Err == nil {
		t.Fatal("a lost link acked")
	}
	time.Sleep(time.Second) // on purpose: ten rounds of resolveLostLoop, past LinkGrace
	if end, released := pb.tier.PinEnd(pin); released || end >= 0 || pb.ProxyPinsHeld() != 1 {
		t.Fatalf("the lost link's pin went to %d (released %v) before the fence could prove anything", end, released)
	}
	release(nil)
	pb.fs.SetHook(nil)
	testutil.Eventually(t, 30*time.Second, "the fence resolves the pin", func() bool {
		end, _ := pb.tier.PinEnd(pin)
		return end >= 0
	})
	wantPinHeld(t, pb, pin, 1, "resolved by the fence")

	// The client's retry, through the proxy again on a new session: a duplicate of the
	// original, acked with its offset.
	l2, pin2 := pb.proxied(t, batch)
	a = <-pb.send(pb.peerClient(t), 100, l2)
	if a.err != nil || a.rs[0].Class != peer.LinkAcked || a.rs[0].Base != 0 {
		t.Fatalf("retry answer %+v %v, want acked at 0", a.rs, a.err)
	}
	if r := pb.answer(l2, pin2, a.rs[0], nil); r.Err != nil || r.Base != 0 {
		t.Fatalf("retry: %+v", r)
	}
	if pb.next() != 1 {
		t.Fatalf("log end %d after the retry: it went in twice", pb.next())
	}
	readBack(t, pb, "only copy")
}

// readBack consumes partition 0 of "zoned" from offset 0 and wants one record, value.
func readBack(t *testing.T, pb *proofBroker, value string) {
	t.Helper()
	cl := clientFor(t, pb.Broker, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"zoned": {0: kgo.NewOffset().At(0)}}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fs := cl.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	recs := fs.Records()
	if len(recs) == 0 || recs[0].Offset != 0 || string(recs[0].Value) != value {
		t.Fatalf("read back %v, want %q at 0", recs, value)
	}
}

// A dead proxy's sealed directory: PROXYEND is written only from the leaders' answers to
// a fence of its link sessions, never from a guess after a grace. While a link of it
// waits in the leader's WAL, no end is written; once the fence answers, the end covers
// the link, and a later link of its sessions is refused.
func TestDeadProxyDirWaitsForFenceProof(t *testing.T) {
	pb := startProofBroker(t, time.Hour)
	l, _ := pb.proxied(t, makeBatch(-1, -1, -1, []byte("a"), []byte("b")))
	release, blocked := stallWrites(t, pb, waltest.OpWrite)
	ch := pb.send(pb.peerClient(t), 3, l)
	testutil.Eventually(t, 30*time.Second, "the link is prepared, its write stalled", func() bool { return pb.next() == 2 && blocked() })

	dir := t.TempDir() // stands for the dead proxy's sealed directory (PROXYEND goes there)
	src := partlog.Source{Broker: pb.cfg.NodeID, Epoch: pb.epoch, Dir: dir}
	idx := partlog.DirIndex{Proxied: []partlog.DirIndexProxied{{Topic: pb.topic.ID, Partition: 0}}}
	seal := wal.SealInfo{Time: time.Now().Add(-time.Hour)} // long past any grace
	type res struct {
		ok  bool
		err error
	}
	done := make(chan res, 1)
	go func() {
		ok, err := pb.proxiedUploaded(pb.meta.View(), src, seal, idx)
		done <- res{ok, err}
	}()
	time.Sleep(time.Second) // on purpose: the decision must wait for the fence
	if _, ok, err := partlog.ReadProxyEnds(pb.walFS(), dir); ok || err != nil {
		t.Fatalf("PROXYEND written (%v %v) while a link of the directory could still be applied", ok, err)
	}
	release(nil)
	pb.fs.SetHook(nil)
	if a := <-ch; a.err != nil || a.rs[0].Class != peer.LinkAcked {
		t.Fatalf("the stalled link: %+v %v", a.rs, a.err)
	}
	if r := <-done; r.ok || r.err != nil {
		t.Fatalf("directory uploaded: %v %v (nothing was uploaded)", r.ok, r.err)
	}
	ends, ok, err := partlog.ReadProxyEnds(pb.walFS(), dir)
	if err != nil || !ok || len(ends.Ends) != 1 || ends.Ends[0].End < 2 {
		t.Fatalf("PROXYEND %+v %v %v, want an end covering the link (2)", ends, ok, err)
	}
	// The fence holds: a link of the dead registration's sessions is refused for good.
	l2, _ := pb.proxied(t, makeBatch(-1, -1, -1, []byte("late")))
	if a := <-pb.send(pb.peerClient(t), 1<<40, l2); a.err != nil || a.rs[0].Class != peer.LinkRefused {
		t.Fatalf("a link of a fenced session: %+v %v, want refused", a.rs, a.err)
	}
	if pb.next() != 2 {
		t.Fatalf("log end %d: the fenced link went in", pb.next())
	}
}

// A retry of an idempotent batch that arrives while the original is prepared but not
// synced is not answered before the original's sync; when that sync fails, the retry is
// not acked (the original is not in the log). Direct produce and proxied links alike.
func TestDuplicateRetryWaitsForOriginalSync(t *testing.T) {
	t.Run("direct", func(t *testing.T) {
		pb := startProofBroker(t, time.Hour)
		batch := makeBatch(11, 0, 0, []byte("a"))
		fail, blocked := stallWrites(t, pb, waltest.OpSync)
		produce := func() <-chan kmsg.ProduceResponseTopicPartition {
			ch := make(chan kmsg.ProduceResponseTopicPartition, 1)
			cl := clientFor(t, pb.Broker)
			go func() {
				r, err := kafkatest.Produce(testCtx(t), cl, "zoned", 0, batch)
				if err != nil {
					r.ErrorCode = -2
				}
				ch <- r
			}()
			return ch
		}
		orig := produce()
		testutil.Eventually(t, 30*time.Second, "the original is prepared, its sync stalled", func() bool { return pb.next() == 1 && blocked() })
		retry := produce()
		select {
		case r := <-retry:
			t.Fatalf("the retry was answered (%+v) before the original's sync", r)
		case <-time.After(time.Second): // on purpose: time for a premature answer
		}
		fail(errors.New("injected sync failure"))
		if r := <-orig; r.ErrorCode == 0 {
			t.Fatalf("original acked after its sync failed: %+v", r)
		}
		if r := <-retry; r.ErrorCode == 0 {
			t.Fatalf("retry acked as a duplicate of an original that is not in the log: %+v", r)
		}
	})
	t.Run("proxied", func(t *testing.T) {
		pb := startProofBroker(t, time.Hour)
		batch := makeBatch(12, 0, 0, []byte("a"))
		l, pin := pb.proxied(t, batch)
		l2, pin2 := pb.proxied(t, batch)
		fail, blocked := stallWrites(t, pb, waltest.OpSync)
		orig := pb.send(pb.peerClient(t), 1, l)
		testutil.Eventually(t, 30*time.Second, "the original is prepared, its sync stalled", func() bool { return pb.next() == 1 && blocked() })
		retry := pb.send(pb.peerClient(t), 2, l2)
		select {
		case a := <-retry:
			t.Fatalf("the retry was answered (%+v) before the original's sync", a)
		case <-time.After(time.Second): // on purpose: time for a premature answer
		}
		fail(errors.New("injected sync failure"))
		a := <-orig
		if a.err != nil || a.rs[0].Class != peer.LinkMaybeLogged {
			t.Fatalf("original: %+v %v, want maybe logged (written, sync failed)", a.rs, a.err)
		}
		if r := pb.answer(l, pin, a.rs[0], nil); r.Err == nil {
			t.Fatal("original acked")
		}
		wantPinHeld(t, pb, pin, 1, "written, sync failed")
		a = <-retry
		if a.err != nil || a.rs[0].Class == peer.LinkAcked {
			t.Fatalf("retry: %+v %v, want not acked", a.rs, a.err)
		}
		if r := pb.answer(l2, pin2, a.rs[0], nil); r.Err == nil {
			t.Fatal("retry acked")
		}
		if pb.ProxyPinsHeld() != 1 {
			t.Fatalf("%d pins held, want the original's only", pb.ProxyPinsHeld())
		}
	})
}

// A link fence only ever moves up: a later, lower fence (a proxy's own round after the
// GC of its dead directory fenced its whole registration) does not unfence anything.
func TestLinkFenceOnlyRises(t *testing.T) {
	px := &proxy{fences: map[int32]linkFence{}}
	px.fence(3, linkFence{epoch: 5, session: 0}) // every session of epochs up to 4
	px.fence(3, linkFence{epoch: 4, session: 2}) // lower: ignored
	for _, c := range []struct {
		epoch   int64
		session uint64
		fenced  bool
	}{{4, 1, true}, {4, 9, true}, {3, 100, true}, {5, 0, false}, {5, 1, false}} {
		if got := px.fenced(3, c.epoch, c.session); got != c.fenced {
			t.Errorf("session (%d, %d): fenced %v, want %v", c.epoch, c.session, got, c.fenced)
		}
	}
	px.fence(3, linkFence{epoch: 5, session: 3})
	if !px.fenced(3, 5, 2) || px.fenced(3, 5, 3) || px.fenced(4, 1, 0) {
		t.Error("a higher fence not applied, or applied to another proxy")
	}
}

// OpFenceLinks over TCP, as a proxy asks a leader in another zone: the answer waits for
// a link of a fenced session that is stuck in the leader's WAL write, its log end covers
// that link, and a link of a fenced session arriving afterwards is refused, while a
// session above the fence is served.
func TestFenceLinksOverTCP(t *testing.T) {
	pb := startProofBroker(t, time.Hour)
	l, _ := pb.proxied(t, makeBatch(-1, -1, -1, []byte("a"), []byte("b"), []byte("c")))
	release, blocked := stallWrites(t, pb, waltest.OpWrite)
	stuck := pb.send(pb.peerClient(t), 4, l)
	testutil.Eventually(t, 30*time.Second, "the link is prepared, its write stalled", func() bool { return pb.next() == 3 && blocked() })

	type fenceAnswer struct {
		os  []peer.Offsets
		err error
	}
	fenced := make(chan fenceAnswer, 1)
	req := peer.FenceRequest{Proxy: pb.cfg.NodeID, Epoch: pb.epoch, Session: 5, Parts: []peer.PartitionRef{{Topic: pb.topic.ID, Partition: 0}, {Topic: metadata.TopicID{7}, Partition: 0}}}
	pb.peerClient(t).Do(req.AppendTo(nil), func(resp []byte, err error) {
		var os []peer.Offsets
		if err == nil {
			os, err = peer.DecodeOffsets(resp, 2)
		}
		fenced <- fenceAnswer{os, err}
	})
	select {
	case a := <-fenced:
		t.Fatalf("fence answered (%+v) while a link of a fenced session could still be applied", a)
	case <-time.After(time.Second): // on purpose: time for a premature answer
	}
	release(nil)
	pb.fs.SetHook(nil)
	if a := <-stuck; a.err != nil || a.rs[0].Class != peer.LinkAcked {
		t.Fatalf("the stuck link: %+v %v", a.rs, a.err)
	}
	a := <-fenced
	if a.err != nil || a.os[0].Code != 0 || a.os[0].HW < 3 || a.os[1].Code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("fence answer %+v %v, want an end covering the link (3) and NOT_LEADER for a partition not led here", a.os, a.err)
	}
	late, _ := pb.proxied(t, makeBatch(-1, -1, -1, []byte("late")))
	if a := <-pb.send(pb.peerClient(t), 4, late); a.err != nil || a.rs[0].Class != peer.LinkRefused {
		t.Fatalf("a link of a fenced session: %+v %v, want refused", a.rs, a.err)
	}
	if a := <-pb.send(pb.peerClient(t), 5, late); a.err != nil || a.rs[0].Class != peer.LinkAcked || a.rs[0].Base != 3 {
		t.Fatalf("a link of a session above the fence: %+v %v, want acked at 3", a.rs, a.err)
	}
}
