package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
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
