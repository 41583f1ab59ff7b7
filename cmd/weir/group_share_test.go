package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/testutil"
)

// weir group list and describe show share groups (KIP-932): a franz-go share consumer of
// group "workers" reads the 2 × 5 records of "jobs" (the group's share.auto.offset.reset
// set to earliest first, through IncrementalAlterConfigs on the GROUP resource); list
// types it share with one member, describe shows its epochs, the member and each
// partition's share-partition start offset 5, log end 5 and lag 0.
func TestGroupShare(t *testing.T) {
	c := startGroupCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := runGroup(ctx, append(args, "--bootstrap", c.Bootstrap(), "--timeout", "30s"), &out); err != nil {
			t.Fatalf("weir group %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	raw := newTestClient(t, c)
	adm := kadm.NewClient(raw)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "jobs"); err != nil {
		t.Fatal(err)
	}
	prod := newTestClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < 2; p++ {
		for i := 0; i < 5; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "jobs", Partition: p, Value: []byte(fmt.Sprintf("j%d-%d", p, i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "workers"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	earliest := "earliest"
	cfg.Name, cfg.Value = "share.auto.offset.reset", &earliest
	r.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{cfg}
	alter.Resources = []kmsg.IncrementalAlterConfigsRequestResource{r}
	testutil.Eventually(t, 30*time.Second, "share.auto.offset.reset set", func() bool {
		resp, err := alter.RequestWith(ctx, raw)
		return err == nil && resp.Resources[0].ErrorCode == 0
	})

	var mu sync.Mutex
	seen := map[string]bool{}
	cons := newTestClient(t, c, kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"), kgo.ClientID("worker-1"))
	go func() {
		for {
			fs := cons.PollFetches(ctx)
			if fs.IsClientClosed() || ctx.Err() != nil {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen[string(r.Value)] = true
				mu.Unlock()
			})
		}
	}()
	testutil.Eventually(t, 60*time.Second, "the share consumer reads the 10 records", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 10
	})

	var list []listedGroup
	testutil.Eventually(t, 30*time.Second, "weir group list shows workers as a share group with a member", func() bool {
		list = nil
		decodeJSON(t, run("list", "--json"), &list)
		for _, g := range list {
			if g.Group == "workers" {
				return g.Type == "share" && g.ProtocolType == "share" && g.Members == 1
			}
		}
		return false
	})
	var desc []groupDescription
	testutil.Eventually(t, 30*time.Second, "every record acknowledged (start offsets 5)", func() bool {
		desc = nil
		decodeJSON(t, run("describe", "workers", "--json"), &desc)
		if len(desc) != 1 || len(desc[0].Partitions) != 2 {
			return false
		}
		for _, p := range desc[0].Partitions {
			if p.StartOffset == nil || *p.StartOffset != 5 || p.LogEndOffset != 5 || p.Lag != 0 {
				return false
			}
		}
		return true
	})
	d := desc[0]
	if d.Type != "share" || d.State != "Stable" || d.GroupEpoch <= 0 || d.AssignmentEpoch <= 0 || len(d.Members) != 1 {
		t.Fatalf("describe workers: %+v", d)
	}
	m := d.Members[0]
	if m.ClientID != "worker-1" || m.MemberEpoch != d.AssignmentEpoch || len(m.Assigned) != 1 || m.Assigned[0].Topic != "jobs" || len(m.Assigned[0].Partitions) != 2 {
		t.Fatalf("the member: %+v", m)
	}
	for _, p := range d.Partitions {
		if p.MemberID != m.MemberID {
			t.Fatalf("partition %d assigned to %q, want %s", p.Partition, p.MemberID, m.MemberID)
		}
	}
	table := run("describe", "workers")
	if testing.Verbose() {
		t.Logf("weir group describe workers\n%s\nweir group list\n%s", table, run("list"))
	}
	if row := tableRow(table, "jobs", "0"); len(row) < 6 || row[2] != "5" || row[3] != "5" || row[4] != "0" {
		t.Fatalf("describe table, partition 0 row %v:\n%s", row, table)
	}
	if !strings.Contains(table, "START-OFFSET") || !strings.Contains(table, "share (assignor simple)") {
		t.Fatalf("describe table:\n%s", table)
	}
}
