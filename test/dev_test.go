package test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/internal/testutil"
)

// `weir dev` is what `make run` starts: 3 controllers and 3 brokers in zones a, b, c in
// one process. A client lists the three brokers with their racks, produces and consumes,
// and SIGINT stops the process cleanly.
func TestWeirDev(t *testing.T) {
	dir := t.TempDir()
	// weir dev numbers each kind of port upwards from a base: find bases with three free
	// ports in a row, TCP and UDP (gossip binds both). They are taken below Linux's
	// ephemeral range (32768 and up), which the kernel never hands out for a port 0 bind
	// or a connect, so the other packages' tests, running beside this one, cannot take
	// them between this check and weir dev's bind.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 23))
	free := func(port int) bool {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return false
		}
		ln.Close()
		pc, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return false
		}
		pc.Close()
		return true
	}
	base := func() int {
		handedOut.Lock()
		defer handedOut.Unlock()
		for {
			p := 20000 + rng.IntN(12000)
			ok := true
			for i := 0; i < 3 && ok; i++ {
				ok = !handedOut.ports[p+i] && free(p+i)
			}
			if ok {
				for i := 0; i < 3; i++ {
					handedOut.ports[p+i] = true
				}
				return p
			}
		}
	}
	kafkaPort := base()
	args := []string{"dev", "--data-dir", filepath.Join(dir, "data"), "--metrics", "", "--kafka-port", fmt.Sprint(kafkaPort)}
	for _, flag := range []string{"--raft-port", "--api-port", "--gossip-port"} {
		args = append(args, flag, fmt.Sprint(base()))
	}
	logf, err := os.Create(filepath.Join(dir, "dev.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(weirBin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	})
	bootstrap := fmt.Sprintf("127.0.0.1:%d", kafkaPort)
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.DefaultProduceTopic("dev"), kgo.AllowAutoTopicCreation(), kgo.RetryTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var racks []string
	served := false
	defer logUnless(t, &served, filepath.Join(dir, "dev.log"))
	testutil.EventuallyNoError(t, 90*time.Second, "weir dev to serve 3 brokers", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		md, err := adm.Metadata(ctx)
		if err != nil {
			return err
		}
		if len(md.Brokers) != 3 {
			return fmt.Errorf("%d brokers", len(md.Brokers))
		}
		for _, b := range md.Brokers {
			racks = append(racks, fmt.Sprintf("%d:%s", b.NodeID, *b.Rack))
		}
		return nil
	})
	served = true
	sort.Strings(racks)
	if fmt.Sprint(racks) != "[1:a 2:b 3:c]" {
		t.Fatalf("brokers and racks: %v", racks)
	}
	// A development cluster settles a new group at once, as Kafka's development config
	// does (group.initial.rebalance.delay.ms=0); brokers keep 3 s.
	bcfg, err := adm.DescribeBrokerConfigs(ctxT(t, 30*time.Second), 1)
	if err != nil {
		t.Fatal(err)
	}
	delay, ferr := bcfg.On("1", nil)
	if ferr != nil {
		t.Fatal(ferr)
	}
	got := "(absent)"
	for _, c := range delay.Configs {
		if c.Key == "group.initial.rebalance.delay.ms" {
			got = c.MaybeValue()
		}
	}
	if got != "0" {
		t.Fatalf("weir dev's group.initial.rebalance.delay.ms: %s, want 0", got)
	}
	r, err := cl.ProduceSync(ctxT(t, 60*time.Second), &kgo.Record{Value: []byte("hello")}).First()
	if err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics("dev"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	fs := cons.PollFetches(ctxT(t, 60*time.Second))
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "hello" || recs[0].Offset != r.Offset {
		t.Fatalf("consumed %v (errors %v)", recs, fs.Errors())
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("weir dev exited with %v after SIGINT", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("weir dev did not stop within 60 s of SIGINT")
	}
}
