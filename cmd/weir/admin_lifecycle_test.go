package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/cluster"
	"github.com/weir-io/weir/controller"
	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

// TestAdminLifecycle: undrain gives a drained broker partitions again (a new topic is
// placed on it); a stopped broker, once fenced, is decommissioned: it leaves Kafka's
// Metadata and the controllers' listings, a live broker is refused with what to do,
// and the same ID started again registers active in the next epoch.
func TestAdminLifecycle(t *testing.T) {
	c, err := cluster.Start(cluster.Config{Dir: t.TempDir(), Controllers: 1, Brokers: 3,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		ControllerConfig: func(cc *controller.Config) {
			cc.LeaseTimeout = 3 * time.Second // a stopped broker is fenced within seconds
			cc.Balance = false                // placements and leaders stay where the test put them
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ccfg := ctlclient.DefaultClientConfig()
	ccfg.Controllers = c.APIAddrs()
	cl, err := ctlclient.NewClient(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	kc, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)
	var out bytes.Buffer

	// Undrain.
	b3, _ := cl.View().Broker(3)
	if _, err := cl.DrainRegistration(ctx, 3, b3.Epoch); err != nil {
		t.Fatal(err)
	}
	if err := adminUndrain(ctx, cl, &out, 3); err != nil {
		t.Fatal(err)
	}
	if b, _ := cl.View().Broker(3); !b.Accepting() {
		t.Fatalf("broker 3 after undrain: %+v\n%s", b, out.String())
	}
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "spread"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the new topic in the view", func() bool { return cl.View().Topics["spread"] != nil })
	if n := cl.View().PartitionsLedBy(3); n != 1 {
		t.Fatalf("broker 3 leads %d of a new 3-partition topic after undrain, want 1", n)
	}

	// Decommission: refused while live, done once fenced.
	if err := adminDecommission(ctx, cl, &out, 1); err == nil || !strings.Contains(err.Error(), "drain it") {
		t.Fatalf("decommission of live broker 1: %v", err)
	}
	if err := adminDecommission(ctx, cl, &out, 42); err == nil || !strings.Contains(err.Error(), "never registered") {
		t.Fatalf("decommission of unknown broker 42: %v", err)
	}
	if err := c.StopBroker(2); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "broker 3 fenced and its partition failed over", func() bool {
		b, _ := cl.View().Broker(3)
		return !b.Active() && cl.View().PartitionsLedBy(3) == 0
	})
	if err := adminDecommission(ctx, cl, &out, 3); err != nil {
		t.Fatal(err)
	}
	if b, _ := cl.View().Broker(3); !b.Decommissioned() {
		t.Fatalf("broker 3 after decommission: %+v", b)
	}
	// A Metadata request, not kadm's (it answers from the client's cache).
	testutil.Eventually(t, 30*time.Second, "Metadata without broker 3", func() bool {
		md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, kc)
		if err != nil {
			return false
		}
		for _, b := range md.Brokers {
			if b.NodeID == 3 {
				return false
			}
		}
		return len(md.Brokers) == 2
	})
	out.Reset()
	if err := adminDecommission(ctx, cl, &out, 3); err != nil || !strings.Contains(out.String(), "already") {
		t.Fatalf("second decommission: %v %q", err, out.String())
	}

	// The ID comes back in the next epoch.
	if err := c.StartBroker(2); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "broker 3 registered again", func() bool {
		b, _ := cl.View().Broker(3)
		return b.State == metadata.BrokerActive && b.Epoch == b3.Epoch+1
	})
}
