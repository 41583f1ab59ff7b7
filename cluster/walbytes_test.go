package cluster

import (
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/testutil"
)

// walFSBytes sums broker id's weir_broker_wal_fs_bytes_total{op, wal}.
func walFSBytes(t *testing.T, reg *prometheus.Registry, id int32, op, owner string) float64 {
	t.Helper()
	node := fmt.Sprintf("broker-%d", id)
	return counterSum(t, reg, "weir_broker_wal_fs_bytes_total", func(l map[string]string) bool {
		return l["node"] == node && l["op"] == op && l["wal"] == owner
	})
}

// Every byte a broker moves to or from the shared WAL file system is counted: a zone
// proxy's appends are writes to its own WAL (they were counted nowhere), and the leader
// serving the proxied records reads them from the proxy's WAL (reads of another's WAL,
// also counted as traffic from the proxy's zone). A broker that neither wrote nor read
// them counts none of those bytes.
func TestWALFileSystemBytesCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := startCluster(t, func(cfg *Config) {
		noBalancer(cfg)
		cfg.Registerer = reg
	})
	cl := newClient(t, c)
	if err := createTopic(t, kadm.NewClient(cl), 1, "fsb"); err != nil {
		t.Fatal(err)
	}
	tp := waitTopic(t, c, "fsb")
	leader := tp.Partitions[0].Leader
	proxy := leader%3 + 1
	bystander := proxy%3 + 1
	// The first produce waits for the leader to load the new partition.
	testutil.EventuallyNoError(t, 30*time.Second, "the partition served", func() error {
		r := proxyProduce(t, c, leader, "fsb", 0, kafkatest.Batch(-1, 0, 0, []byte("first")))
		return kerr.ErrorForCode(r.ErrorCode)
	})

	proxyWrites := walFSBytes(t, reg, proxy, "write", "own")
	leaderReads := walFSBytes(t, reg, leader, "read", "other")
	bystanderOther := walFSBytes(t, reg, bystander, "read", "other") + walFSBytes(t, reg, bystander, "write", "own")
	const batches, size = 20, 64 << 10
	var sent float64
	for i := 0; i < batches; i++ {
		v := make([]byte, size)
		rand.Read(v)
		b := kafkatest.Batch(-1, 0, 0, v)
		sent += float64(len(b))
		if r := proxyProduce(t, c, proxy, "fsb", 0, b); r.ErrorCode != 0 {
			t.Fatalf("batch %d through broker %d: %v", i, proxy, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if got := walFSBytes(t, reg, proxy, "write", "own") - proxyWrites; got < sent {
		t.Fatalf("the proxy wrote %v bytes to its WAL for %v bytes of batches", got, sent)
	}
	// A consumer reads every record at the leader: it reads them from the proxy's WAL.
	if got := consumeAll(t, c, "fsb", batches+1); len(got) != batches+1 {
		t.Fatalf("read %d records, want %d", len(got), batches+1)
	}
	testutil.Eventually(t, 30*time.Second, "the leader's reads of the proxy's WAL counted", func() bool {
		return walFSBytes(t, reg, leader, "read", "other")-leaderReads >= sent
	})
	if got := walFSBytes(t, reg, bystander, "read", "other") + walFSBytes(t, reg, bystander, "write", "own") - bystanderOther; got >= sent {
		t.Fatalf("broker %d, neither proxy nor leader, counted %v bytes", bystander, got)
	}
}
