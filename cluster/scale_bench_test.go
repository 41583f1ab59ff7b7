package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weir-io/weir/bench"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/controller"
	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/metadata"
)

// BenchmarkScale measures what issue 14 item 3 asks, on one in-process cluster (3
// controllers, 3 brokers, object tier on local files): for each topic size (ascending;
// the topics stay, as on a cluster that grows), the heap growth per idle partition, the
// produce p99 at a fixed rate (`weir bench produce`, open loop), and the metadata
// propagation time (an AlterConfigs of the topic and a log-start change of one of its
// partitions → every broker's View has it). It prints one table; run it alone:
//
//	go test -run '^$' -bench BenchmarkScale -benchtime 1x ./cluster
//
// Env: WEIR_SCALE_SIZES (default 100,10000), WEIR_SCALE_RATE (records/s, default
// 10000), WEIR_SCALE_DURATION (default 10s), WEIR_SCALE_CHANGES (default 20),
// WEIR_SCALE_BALANCE (default false: the controllers' balancer off, since a move of one
// of 100 partitions alone puts a hand-off stall into the p99; true: on, as in `weir
// dev`; "moves" counts leadership changes during the produce phase), WEIR_SCALE_INTERVAL (print the bench's progress lines at this interval),
// WEIR_SCALE_CPUPROFILE (a CPU profile of each produce phase to PATH.<partitions>),
// WEIR_SCALE_STACKS (a goroutine dump each second of the produce phase to
// PATH.<partitions>.<second>), WEIR_SCALE_HEAPPROFILE (a heap profile after each topic
// is created to PATH.<partitions>).
func BenchmarkScale(b *testing.B) {
	sizes := envInts(b, "WEIR_SCALE_SIZES", "100,10000")
	rate := envStr("WEIR_SCALE_RATE", "10000")
	dur := envStr("WEIR_SCALE_DURATION", "10s")
	changes := envInts(b, "WEIR_SCALE_CHANGES", "20")[0]
	// The weir command runs with at least 4 Ps (--gomaxprocs); so does this process,
	// which holds the whole cluster.
	if runtime.GOMAXPROCS(0) < 4 && os.Getenv("GOMAXPROCS") == "" {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	}
	for range b.N {
		balance := envStr("WEIR_SCALE_BALANCE", "false") == "true"
		c, err := Start(Config{
			Dir: b.TempDir(), Controllers: 3, Brokers: 3, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			BrokerConfig:     func(bc *broker.Config) { bc.OffsetsTopicPartitions = 6 },
			ControllerConfig: func(cc *controller.Config) { cc.Balance = balance },
		})
		if err != nil {
			b.Fatal(err)
		}
		admin, err := ctlclient.NewClient(ctlclient.ClientConfig{Controllers: c.APIAddrs(), BrokerID: -1})
		if err != nil {
			b.Fatal(err)
		}
		var rows []scaleRow
		for _, n := range sizes {
			rows = append(rows, scaleRun(b, c, admin, n, rate, dur, changes))
		}
		admin.Close()
		c.Close()
		printScale(b, rows, rate)
	}
}

type scaleRow struct {
	partitions        int
	bytesPerPartition float64
	p50, p99, p999    float64
	propP50, propMax  time.Duration
	// moves: leadership changes of the topic's partitions during the produce phase (the
	// balancer's moves; each stalls its partition's appends for a hand-off)
	moves int64
}

// epochs sums the leader epochs of topic's partitions.
func epochs(v *metadata.View, topic string) int64 {
	var n int64
	if t := v.Topics[topic]; t != nil {
		for _, p := range t.Partitions {
			n += int64(p.LeaderEpoch)
		}
	}
	return n
}

func scaleRun(b *testing.B, c *Cluster, admin *ctlclient.Client, n int, rate, dur string, changes int) scaleRow {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	row := scaleRow{partitions: n}
	topic := fmt.Sprintf("scale-%d", n)

	heap0 := heapAfterGC()
	t, err := admin.CreateTopic(ctx, metadata.TopicSpec{Name: topic, Partitions: int32(n), ReplicationFactor: -1}, false)
	if err != nil {
		b.Fatal(err)
	}
	waitBrokersAt(b, ctx, c, admin.View().Version)
	// on purpose: a settling time before the heap is measured (partitions loaded, first
	// heartbeats and load reports), part of what the benchmark measures
	time.Sleep(2 * time.Second)
	row.bytesPerPartition = float64(heapAfterGC()-heap0) / float64(n)
	if path := os.Getenv("WEIR_SCALE_HEAPPROFILE"); path != "" { // where the bytes are
		f, err := os.Create(fmt.Sprintf("%s.%d", path, n))
		if err != nil {
			b.Fatal(err)
		}
		pprof.WriteHeapProfile(f)
		f.Close()
	}

	epochs0 := epochs(admin.View(), topic)
	var out, progress bytes.Buffer
	args := []string{"produce", "--bootstrap", c.Bootstrap(), "--topic", topic, "--rate", rate, "--duration", dur,
		"--warmup", "3s", "--record-size", "256", "--producers", "2", "--json", "--interval", envStr("WEIR_SCALE_INTERVAL", "1h")}
	if path := os.Getenv("WEIR_SCALE_CPUPROFILE"); path != "" { // the produce phase only
		f, err := os.Create(fmt.Sprintf("%s.%d", path, n))
		if err != nil {
			b.Fatal(err)
		}
		pprof.StartCPUProfile(f)
		defer f.Close()
	}
	if path := os.Getenv("WEIR_SCALE_STACKS"); path != "" { // goroutines each second
		sctx, scancel := context.WithCancel(ctx)
		defer scancel()
		go func() {
			for i := 0; sctx.Err() == nil; i++ {
				if f, err := os.Create(fmt.Sprintf("%s.%d.%02d", path, n, i)); err == nil {
					pprof.Lookup("goroutine").WriteTo(f, 1)
					f.Close()
				}
				select {
				case <-sctx.Done():
				case <-time.After(time.Second):
				}
			}
		}()
	}
	err = bench.Main(ctx, args, &out, &progress)
	if os.Getenv("WEIR_SCALE_CPUPROFILE") != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		b.Fatalf("weir bench %v: %v\n%s", args, err, progress.String())
	}
	if os.Getenv("WEIR_SCALE_INTERVAL") != "" {
		fmt.Fprint(os.Stderr, progress.String())
	}
	var res bench.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Produce == nil || res.Produce.Latency == nil {
		b.Fatalf("weir bench: %v\n%s", err, out.String())
	}
	row.moves = epochs(admin.View(), topic) - epochs0
	l := res.Produce.Latency
	row.p50, row.p99, row.p999 = l.P50, l.P99, l.P999

	// Propagation: alternate a config change of the whole topic and a log-start change
	// of one partition; from before the call until every broker's View has the version.
	var props []time.Duration
	for i := range changes {
		t0 := time.Now()
		if i%2 == 0 {
			op := metadata.ConfigOp{Key: "retention.ms", Op: metadata.OpSet, Value: strconv.Itoa(3600000 + i)}
			err = admin.AlterTopicConfigs(ctx, topic, []metadata.ConfigOp{op}, false)
		} else {
			err = admin.SetLogStartOffset(ctx, t.ID, int32(i%n), 1)
		}
		if err != nil {
			b.Fatal(err)
		}
		waitBrokersAt(b, ctx, c, admin.View().Version)
		props = append(props, time.Since(t0))
	}
	slices.Sort(props)
	row.propP50, row.propMax = props[len(props)/2], props[len(props)-1]
	return row
}

// waitBrokersAt waits until every broker's View has reached version v.
func waitBrokersAt(b *testing.B, ctx context.Context, c *Cluster, v uint64) {
	for i := range c.cfg.Brokers {
		cl := c.Broker(i).Client
		for {
			ch := cl.Changed()
			if cl.View().Version >= v {
				break
			}
			select {
			case <-ch:
			case <-ctx.Done():
				b.Fatalf("broker %d never reached version %d", i+1, v)
			}
		}
	}
}

func heapAfterGC() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func printScale(b *testing.B, rows []scaleRow, rate string) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nscale: 3 controllers + 3 brokers in one process (GOMAXPROCS %d), %s rec/s of 256 B, 2 producers\n", runtime.GOMAXPROCS(0), rate)
	fmt.Fprintf(&sb, "%-11s %14s %9s %9s %9s %6s %12s %12s\n", "partitions", "heap B/part", "p50 ms", "p99 ms", "p99.9 ms", "moves", "prop p50", "prop max")
	for _, r := range rows {
		fmt.Fprintf(&sb, "%-11d %14.0f %9.2f %9.2f %9.2f %6d %12s %12s\n", r.partitions, r.bytesPerPartition, r.p50, r.p99, r.p999, r.moves,
			r.propP50.Round(10*time.Microsecond), r.propMax.Round(10*time.Microsecond))
	}
	if len(rows) >= 2 {
		lo, hi := rows[0], rows[len(rows)-1]
		fmt.Fprintf(&sb, "ratio %d/%d: p99 %.2f (limit 1.20), propagation p50 %.2f (limit 2.00)\n", hi.partitions, lo.partitions,
			hi.p99/lo.p99, float64(hi.propP50)/float64(lo.propP50))
	}
	fmt.Fprint(os.Stdout, sb.String())
	b.ReportMetric(0, "ns/op")
	if len(rows) >= 2 {
		// For `weir bench suite` (bench/suite_steps.go reads these by name).
		lo, hi := rows[0], rows[len(rows)-1]
		b.ReportMetric(lo.p99, "p99_lo_ms")
		b.ReportMetric(hi.p99, "p99_hi_ms")
		b.ReportMetric(float64(lo.propP50)/1e6, "prop_lo_ms")
		b.ReportMetric(float64(hi.propP50)/1e6, "prop_hi_ms")
		b.ReportMetric(hi.bytesPerPartition, "heap_B_per_partition")
	}
}

func envStr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envInts(b *testing.B, key, def string) []int {
	var out []int
	for _, f := range strings.Split(envStr(key, def), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("%s: %q is not a positive number", key, f)
		}
		out = append(out, n)
	}
	return out
}
