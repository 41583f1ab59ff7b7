package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/cluster"
	"github.com/weir-io/weir/controller"
	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/internal/testutil"
)

// TestPartitionDescribe: `weir partition describe` against a 3-broker cluster shows,
// for a partition an idempotent producer wrote to, the high watermark the producer's
// acks imply, the producer, its bytes in the leader's WAL directory (a path under the
// shared WAL root, by broker and epoch), and the log chain; after a graceful move and
// more records, the chain names both brokers and the WAL bytes are in both brokers'
// directories (the new leader reads the old one's WAL; nothing was copied).
func TestPartitionDescribe(t *testing.T) {
	dir := t.TempDir()
	c, err := cluster.Start(cluster.Config{Dir: dir, Controllers: 1, Brokers: 3, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		ControllerConfig: func(cc *controller.Config) {
			loadedTimeouts(cc)
			cc.Balance = false // the partition stays where the test moves it
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.DefaultProduceTopic("where"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "where"); err != nil {
		t.Fatal(err)
	}
	produce := func(n int, tag string) {
		t.Helper()
		for i := 0; i < n; i++ {
			r := &kgo.Record{Partition: 0, Value: []byte(fmt.Sprintf("%s-%03d-%s", tag, i, strings.Repeat("x", 100)))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(50, "before")
	describe := func() partitionInfo {
		t.Helper()
		var out bytes.Buffer
		args := []string{"describe", "where", "--partition", "0", "--json", "--bootstrap", c.Bootstrap(),
			"--controllers", strings.Join(c.APIAddrs(), ","), "--timeout", "30s"}
		if err := runPartition(ctx, args, &out); err != nil {
			t.Fatalf("weir partition %s: %v", strings.Join(args, " "), err)
		}
		var infos []partitionInfo
		if err := json.Unmarshal(out.Bytes(), &infos); err != nil || len(infos) != 1 {
			t.Fatalf("--json output %q: %v", out.String(), err)
		}
		return infos[0]
	}
	walDir := func(broker int32) string {
		return filepath.Join(dir, "wal", fmt.Sprintf("broker-%d", broker)) + string(filepath.Separator)
	}
	in := describe()
	if in.HighWatermark != 50 || in.LogStart != 0 || in.Producers != 1 || len(in.Errors) != 0 {
		t.Fatalf("after 50 records: %+v", in)
	}
	if len(in.LogChain) != 1 || in.LogChain[0].Broker != in.Leader {
		t.Fatalf("log chain %+v of a partition led by %d", in.LogChain, in.Leader)
	}
	// Every byte is in the WAL or in objects, and the WAL's are in the leader's directory.
	if in.WALBytes+in.ObjectBytes < 50*100 {
		t.Fatalf("%d bytes in the WAL and %d in objects for 50 records of over 100 bytes", in.WALBytes, in.ObjectBytes)
	}
	for _, d := range in.WALDirs {
		if !strings.HasPrefix(d.Path, walDir(in.Leader)) || d.Bytes <= 0 {
			t.Fatalf("WAL dir %+v is not broker %d's (%s)", d, in.Leader, walDir(in.Leader))
		}
	}

	// Move it; more records go to the new leader's WAL.
	from := in.Leader
	to := from%3 + 1
	ccfg := ctlclient.DefaultClientConfig()
	ccfg.Controllers = c.APIAddrs()
	ctl, err := ctlclient.NewClient(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	if err := ctl.MovePartition(ctx, ctl.View().Topics["where"].ID, 0, to); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "the move completes", func() bool {
		p := c.Controller(0).View().Topics["where"].Partitions[0]
		return p.Leader == to && !p.Moving
	})
	produce(30, "after")
	testutil.Eventually(t, time.Minute, "describe shows the move", func() bool {
		in = describe()
		return in.Leader == to && in.HighWatermark == 80
	})
	if len(in.LogChain) != 2 || in.LogChain[0].Broker != from || in.LogChain[1].Broker != to || in.LogChain[1].StartOffset != 50 {
		t.Fatalf("log chain after the move %d→%d at 50: %+v", from, to, in.LogChain)
	}
	seen := map[int32]bool{}
	for _, d := range in.WALDirs {
		for _, b := range []int32{from, to} {
			if strings.HasPrefix(d.Path, walDir(b)) {
				seen[b] = true
			}
		}
	}
	if in.InObjectsTo < 50 && !seen[from] || !seen[to] {
		t.Fatalf("WAL dirs after the move %d→%d: %+v (objects below %d)", from, to, in.WALDirs, in.InObjectsTo)
	}

	// The table names the same.
	var table bytes.Buffer
	if err := runPartition(ctx, []string{"describe", "where", "--bootstrap", c.Bootstrap(), "--controllers", strings.Join(c.APIAddrs(), ",")}, &table); err != nil {
		t.Fatal(err)
	}
	var row []string
	for _, line := range strings.Split(table.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "where/0" {
			row = f
		}
	}
	if len(row) < 2 || row[1] != fmt.Sprint(to) || !strings.HasSuffix(strings.Join(row, " "), fmt.Sprintf("%d@0 %d@50", from, to)) {
		t.Fatalf("where/0 in the table: %q\n%s", row, table.String())
	}
}
