package broker

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

// A produce that arrives while the broker's lease is not valid is refused before it
// reaches the WAL: it takes no offset and never shows up in the log. The check after the
// sync (finishAppend) is the one that guards acks; this one keeps a broker that lost its
// controllers from filling its log with records every client was told failed (each
// would come back as a duplicate of its retry). Without it, the refused batch would be
// durable at offset 1 and readable, and the next write would get offset 2.
func TestProduceWithoutALeaseIsNotLogged(t *testing.T) {
	b, store := startLeasedBroker(t, nil)
	cl := clientFor(t, b)
	createTopic(t, kadm.NewClient(cl), "arrive", 1, nil)
	wantProduce(t, "with a lease", rawProduce(t, cl, "arrive", makeBatch(-1, -1, -1, []byte("a"))), 0, 0)
	store.valid.Store(false)
	wantProduce(t, "without a lease", rawProduce(t, cl, "arrive", makeBatch(-1, -1, -1, []byte("refused"))), kerr.NotLeaderForPartition.Code, 0)
	store.valid.Store(true)
	wantProduce(t, "with the lease back", rawProduce(t, cl, "arrive", makeBatch(-1, -1, -1, []byte("b"))), 0, 1)
	consumeAll(t, b.Addr().String(), "arrive", map[int32]map[int64]string{0: {0: "a", 1: "b"}})
}

// A duplicate retry that arrived with a valid lease is answered only once its group's
// sync is done; if the lease ran out meanwhile, its ack is refused like any other (a
// duplicate's ack confirms an offset too). The arrival check passed, so only the check in
// finishAppend's duplicate branch refuses it.
func TestDuplicateWaitingOnASyncNeedsTheLease(t *testing.T) {
	fs := waltest.NewFaultFS(wal.OSFS())
	b, store := startLeasedBroker(t, fs)
	cl := clientFor(t, b)
	createTopic(t, kadm.NewClient(cl), "duplease", 1, nil)
	wantProduce(t, "original", rawProduce(t, cl, "duplease", makeBatch(7, 0, 0, []byte("a"))), 0, 0)

	// The next group's sync blocks until released; the lease runs out while it waits.
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fs.SetHook(func(op waltest.Op, name string, _ int64, _ int) error {
		if op == waltest.OpSync && filepath.Ext(name) == ".wal" {
			once.Do(func() {
				close(entered)
				<-release
			})
		}
		return nil
	})
	second := make(chan kmsg.ProduceResponseTopicPartition, 1)
	go func() { second <- rawProduce(t, clientFor(t, b), "duplease", makeBatch(7, 0, 1, []byte("b"))) }()
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the second batch's sync never started")
	}
	retry := make(chan kmsg.ProduceResponseTopicPartition, 1)
	go func() { retry <- rawProduce(t, clientFor(t, b), "duplease", makeBatch(7, 0, 0, []byte("a"))) }()
	// Letting time pass: the retry arrives (lease valid) and queues behind the sync. No
	// observable: it waits inside the WAL's queue, writing nothing. Arriving after the
	// lease ran out, it would get the same answer from the arrival check: a slow machine
	// makes this test check less, never fail.
	time.Sleep(200 * time.Millisecond)
	store.valid.Store(false)
	close(release)
	wantProduce(t, "the batch whose sync outlived the lease", <-second, kerr.NotLeaderForPartition.Code, 0)
	wantProduce(t, "the duplicate that waited on that sync", <-retry, kerr.NotLeaderForPartition.Code, 0)
}
