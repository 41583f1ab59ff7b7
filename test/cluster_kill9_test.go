package test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/internal/testutil"
)

// procCluster runs 3 `weir controller` and 3 `weir broker --controllers` processes that
// share a WAL root, as separate hosts would share the FSx mount.
type procCluster struct {
	dir         string
	controllers []*proc
	brokers     []*proc
	brokerArgs  [][]string
	kafka       []string
	apis        []string // controller API addresses
	gossip      []string // brokers' gossip addresses
	metrics     []string // brokers' /metrics addresses ("" when off)
	fsx         *fsxLab  // each broker's WAL root is its own FUSE mount of walRoot (nil: walRoot itself)
}

// procClusterOptions changes what startProcClusterWith runs.
type procClusterOptions struct {
	// metrics gives every broker a /metrics listener (procCluster.metrics).
	metrics bool
	// brokerArgs are appended to every broker's arguments.
	brokerArgs []string
	// fsx, if set, serves the shared WAL root through test/nfsfs with its model: each
	// broker process mounts it separately, as each broker host mounts FSx (fsx_test.go).
	fsx *fsxConfig
	// controllerArgs are appended to every controller's arguments.
	controllerArgs []string
}

func startProcCluster(t *testing.T) *procCluster {
	t.Helper()
	return startProcClusterWith(t, procClusterOptions{})
}

func startProcClusterWith(t *testing.T, o procClusterOptions) *procCluster {
	t.Helper()
	pc := &procCluster{dir: t.TempDir()}
	if o.fsx != nil {
		pc.fsx = newFSxLab(t, pc.walRoot(), o.fsx)
	}
	var peers []string
	for i := 1; i <= 3; i++ {
		raft := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		api := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		peers = append(peers, fmt.Sprintf("%d=%s/%s", i, raft, api))
		pc.apis = append(pc.apis, api)
	}
	for i := 1; i <= 3; i++ {
		args := append([]string{"controller",
			"--node-id", fmt.Sprint(i), "--data-dir", filepath.Join(pc.dir, fmt.Sprintf("controller-%d", i)),
			"--peers", strings.Join(peers, ",")}, o.controllerArgs...)
		p := startProc(t, pc.dir, fmt.Sprintf("controller-%d.log", i), pc.apis[i-1], args...)
		pc.controllers = append(pc.controllers, p)
	}
	for i := 1; i <= 3; i++ {
		pc.gossip = append(pc.gossip, fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	}
	for i := 1; i <= 3; i++ {
		kafka := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		pc.kafka = append(pc.kafka, kafka)
		metrics := ""
		if o.metrics {
			metrics = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		}
		pc.metrics = append(pc.metrics, metrics)
		args := pc.brokerArgsFor(i, kafka, pc.gossip[i-1], metrics, filepath.Join(pc.dir, fmt.Sprintf("broker-%d", i)))
		args = append(args, o.brokerArgs...)
		pc.brokerArgs = append(pc.brokerArgs, args)
		pc.brokers = append(pc.brokers, startProc(t, pc.dir, fmt.Sprintf("broker-%d.log", i), kafka, args...))
	}
	// A listening broker may not be registered yet: a topic created before every broker is
	// active is placed on the others only (TestProcFailoverKillDuringMoves once found its
	// broker leading none of the topic). Wait for all three.
	adm := pc.admin(t)
	testutil.Eventually(t, time.Minute, "three active brokers", func() bool {
		n := 0
		for _, b := range adm.View().Brokers {
			if b.Active() {
				n++
			}
		}
		return n == 3
	})
	return pc
}

// brokerArgsFor is the command line of broker id listening on kafka, gossiping on gossip
// (joining every broker's gossip address), with /metrics on metrics ("" for none) and
// its local data in dataDir; its WALs go under the cluster's shared WAL root.
func (pc *procCluster) brokerArgsFor(id int, kafka, gossip, metrics, dataDir string) []string {
	args := []string{"broker", "--node-id", fmt.Sprint(id), "--rack", string(rune('a' + id - 1)),
		"--listen", kafka, "--metrics", metrics, "--controllers", strings.Join(pc.apis, ","),
		"--data-dir", dataDir, "--wal-root", pc.brokerWALRoot(dataDir),
		"--gossip-addr", gossip, "--gossip-seeds", strings.Join(pc.gossip, ","), "--wal-segment-bytes", "8388608"}
	if pc.fsx != nil {
		// The object store stands for S3, not for FSx: kept off the lab file system
		// (by default it would sit in the WAL root).
		args = append(args, "--object-dir", filepath.Join(pc.dir, "objects"))
	}
	return args
}

// walRoot is the WAL root every broker shares (the server's directory under FSx).
func (pc *procCluster) walRoot() string { return filepath.Join(pc.dir, "wal") }

// brokerWALRoot is the --wal-root of the broker process keeping its data in dataDir:
// walRoot, or under FSx a mount of it of that process's own (one host, one NFS client).
func (pc *procCluster) brokerWALRoot(dataDir string) string {
	if pc.fsx == nil {
		return pc.walRoot()
	}
	return pc.fsx.mount(filepath.Base(dataDir))
}

func (pc *procCluster) restartBroker(t *testing.T, i int) {
	pc.brokers[i] = startProc(t, pc.dir, fmt.Sprintf("broker-%d.log", i+1), pc.kafka[i], pc.brokerArgs[i]...)
}

// A broker of a 3-zone cluster killed with SIGKILL under produce load comes back with
// every record it acked at its acked offset; offsets stay dense across the restart.
func TestClusterBrokerKill9(t *testing.T) {
	pc := startProcCluster(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(pc.kafka...), kgo.DefaultProduceTopic("k9"),
		kgo.RecordRetries(3), kgo.RecordDeliveryTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctxT(t, 60*time.Second), 6, 1, nil, "k9"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[string]ack{}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			v := fmt.Sprintf("v%08d", i)
			cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked[v] = ack{r.Partition, r.Offset}
					mu.Unlock()
				}
			})
			if i%1000 == 999 {
				time.Sleep(5 * time.Millisecond) // on purpose: keep the buffer from growing without bound
			}
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	awaitLoad(t, count, 5000, time.Minute)
	pc.brokers[1].kill()
	time.Sleep(500 * time.Millisecond) // on purpose: the broker stays down a while, its clients see it gone
	pc.restartBroker(t, 1)
	n := count()
	awaitLoad(t, func() int { return count() - n }, 5000, time.Minute)
	stop()
	wg.Wait()
	cl.Flush(context.Background())
	mu.Lock()
	snapshot := make(map[string]ack, len(acked))
	for k, v := range acked {
		snapshot[k] = v
	}
	mu.Unlock()
	if len(snapshot) < n+minLoad {
		t.Fatalf("only %d records acked after the restart (%d before)", len(snapshot)-n, n)
	}
	t.Logf("%d records acked, %d of them before the SIGKILL", len(snapshot), n)

	cons, err := kgo.NewClient(kgo.SeedBrokers(pc.kafka...), kgo.ConsumeTopics("k9"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ends, err := kadm.NewClient(cons).ListEndOffsets(ctxT(t, 30*time.Second), "k9")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	read := map[string]ack{}
	next := map[int32]int64{}
	rctx := ctxT(t, 120*time.Second)
	for int64(len(read)) < total {
		fs := cons.PollFetches(rctx)
		if rctx.Err() != nil {
			t.Fatalf("read %d of %d records", len(read), total)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, next[r.Partition]-1)
			}
			next[r.Partition]++
			read[string(r.Value)] = ack{r.Partition, r.Offset}
		})
	}
	for v, a := range snapshot {
		if got, ok := read[v]; !ok || got != a {
			t.Fatalf("acked %s at %d/%d, read back %v (found %v)", v, a.partition, a.offset, got, ok)
		}
	}
}
