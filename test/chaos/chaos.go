package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/test/nfsfs"
	"github.com/weir-io/weir/test/proccluster"
)

// Run runs one chaos scenario and returns its report; the report's OK is false when the
// checker found a violation. Progress goes to out.
func Run(ctx context.Context, cfg Config, out io.Writer, log *slog.Logger) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// The modes' broker settings come first: the caller's (a test's) override them.
	var modeArgs []string
	if cfg.Compacted {
		modeArgs = append(modeArgs, compactedBrokerArgs...)
	}
	if cfg.Share {
		modeArgs = append(modeArgs, shareBrokerArgs...)
	}
	cfg.brokerArgs = append(modeArgs, cfg.brokerArgs...)
	t, cleanup, err := openTarget(ctx, &cfg, out)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	boot := t.Bootstrap()
	adm, err := kgo.NewClient(clientOpts(boot)...)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	ka := kadm.NewClient(adm)
	topics := []string{cfg.Topic}
	if cfg.Txn {
		topics = append(topics, cfg.txnTopic(), cfg.ctpIn(), cfg.ctpOut())
	}
	if cfg.Share {
		topics = append(topics, cfg.shareTopic())
	}
	for _, topic := range topics {
		if _, err := ka.CreateTopic(ctx, int32(cfg.Partitions), 1, nil, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return nil, fmt.Errorf("chaos: creating %s: %w", topic, err)
		}
	}
	if cfg.Compacted {
		if _, err := ka.CreateTopic(ctx, int32(cfg.Partitions), 1, compactedTopicConfig, cfg.compactedTopic()); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return nil, fmt.Errorf("chaos: creating %s: %w", cfg.compactedTopic(), err)
		}
	}
	md, err := ka.Metadata(ctx)
	if err != nil {
		return nil, err
	}
	zoneSet := map[string]bool{}
	for _, b := range md.Brokers {
		if b.Rack != nil {
			zoneSet[*b.Rack] = true
		}
	}
	var zones []string
	for z := range zoneSet {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	if ct, ok := t.(*cmdTarget); ok && len(ct.ids) == 0 {
		for _, b := range md.Brokers {
			ct.ids = append(ct.ids, b.NodeID)
		}
	}
	w, err := startWatcher(ctx, boot, cfg.Topic, 200*time.Millisecond)
	if err != nil {
		return nil, err
	}
	defer w.close()
	l, err := startLoad(ctx, cfg, boot, zones, log)
	if err != nil {
		return nil, err
	}
	defer l.close()
	var tl *txnLoad
	var ctp *ctpLoad
	if cfg.Txn {
		tl = startTxnLoad(ctx, cfg, boot)
		defer tl.finish()
		ctp = startCTP(ctx, cfg, boot)
		defer ctp.finish(ctx, 0)
		fmt.Fprintf(out, "transactions: %d writers of %d records per transaction to %s, one in five aborted; consume-transform-produce from %s to %s\n",
			cfg.TxnWriters, cfg.TxnRecords, cfg.txnTopic(), cfg.ctpIn(), cfg.ctpOut())
	}
	var cl *compactedLoad
	if cfg.Compacted {
		if cl, err = startCompacted(ctx, cfg, boot, t); err != nil {
			return nil, err
		}
		defer cl.close()
		defer cl.finish(0)
		fmt.Fprintf(out, "compacted: %d keys, %.0f versions/s of 1 KB to %s\n", cfg.CompactedKeys, cfg.CompactedRate, cfg.compactedTopic())
	}
	var sl *shareLoad
	if cfg.Share {
		if sl, err = startShare(ctx, cfg, boot); err != nil {
			return nil, err
		}
		defer sl.close()
		fmt.Fprintf(out, "share group: %d share consumers of %s (group %s), %.0f records/s\n", cfg.ShareMembers, cfg.shareTopic(), cfg.shareGroup(), cfg.ShareRate)
	}
	if cfg.Members > 0 {
		fmt.Fprintf(out, "consumer group protocol: %s\n", cfg.groupProtocol())
	}
	fmt.Fprintf(out, "load: %.0f records/s of %d B over %d partitions, %d producers, a group of %d, rack readers in %v; faults: %v\n",
		cfg.Rate, cfg.RecordSize, cfg.Partitions, cfg.Producers, cfg.Members, zones, cfg.Faults)

	events := make(chan Event, len(cfg.Faults))
	fctx, stopFaults := context.WithCancel(ctx)
	defer stopFaults()
	var active atomic.Pointer[string]
	go runFaults(fctx, cfg, t, w, tl, l.start, log, events, &active)
	var ran []Event
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	deadline := time.NewTimer(cfg.Duration)
	defer deadline.Stop()
	last := "none"
	lastSec := 0
loop:
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			ran = append(ran, ev)
			last = fmt.Sprintf("%v on %v at %v", ev.Fault.Kind, ev.Brokers, ev.Start.Sub(l.start).Round(time.Second))
		case <-tick.C:
			fault := "last fault: " + last
			if a := active.Load(); a != nil {
				fault = "fault: " + *a
			}
			lastSec = progress(out, l, cfg, lastSec, fault)
		case <-deadline.C:
			break loop
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if events != nil {
		for ev := range events { // a fault still running finishes (a broker must come back)
			ran = append(ran, ev)
		}
	}
	end := time.Now()
	fmt.Fprintln(out, "load stopped; waiting for every produce, then reading everything back")
	if cl != nil {
		cl.finish(time.Minute) // its error is the check's, below
	}
	if sl != nil {
		sl.stopProd()
	}
	if tl != nil {
		tl.finish()
		ctp.finish(ctx, 2*time.Minute)
	}
	if err := l.finish(3 * time.Minute); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := l.readBack(rctx); err != nil {
		return nil, err
	}
	r := analyze(cfg, l, w, ran, end)
	r.Check = l.chk.Verify()
	r.Read = r.Check.Read
	r.OK = r.Check.OK()
	if cfg.Members > 0 && cfg.consumerProtocol() {
		if r.Group, err = describeConsumerGroup(rctx, boot, cfg.group()); err != nil {
			return nil, err
		}
		l.mu.Lock()
		r.Group.EpochChanges = epochChanges(l.groupEvents, l.start, end)
		l.mu.Unlock()
	}
	if cl != nil {
		if err := cl.finish(time.Minute); err != nil {
			return nil, err
		}
		_, own := t.(procTarget)
		if r.Compacted, err = cl.check(rctx, own); err != nil {
			return nil, err
		}
		r.OK = r.OK && r.Compacted.Violations == 0
	}
	if sl != nil {
		if r.Share, err = sl.finish(rctx); err != nil {
			return nil, err
		}
		r.OK = r.OK && r.Share.Violations == 0
	}
	if tl != nil {
		reads, err := tl.readBack(rctx)
		if err != nil {
			return nil, err
		}
		r.Txn = tl.report(reads)
		if r.Txn.CTP, err = ctp.check(rctx); err != nil {
			return nil, err
		}
		r.OK = r.OK && r.Txn.OK()
	}
	if cfg.PNG != "" {
		if err := r.WritePNG(cfg.PNG); err != nil {
			return r, fmt.Errorf("chaos: writing %s: %w", cfg.PNG, err)
		}
	}
	return r, nil
}

// progress prints one line for the whole seconds since the last one.
func progress(out io.Writer, l *load, cfg Config, from int, fault string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	// Whole seconds since the last line (the current one is still filling).
	to := max(len(l.seconds)-1, 0)
	from = min(from, to)
	acked, failed, read := 0, 0, 0
	var lat []time.Duration
	for _, s := range l.seconds[from:to] {
		acked += s.acked
		failed += s.failed
		read += s.groupRead
		lat = append(lat, s.ackLat...)
	}
	secs := max(1, float64(to-from))
	now := time.Now()
	stale := 0
	limit := max(time.Second, 4*time.Duration(float64(time.Second)*float64(cfg.Partitions)/cfg.Rate))
	for p := int32(0); p < int32(cfg.Partitions); p++ {
		if ts := l.acks[p]; len(ts) == 0 || now.Sub(ts[len(ts)-1]) > limit {
			stale++
		}
	}
	// "unavailable" is a snapshot: partitions with no ack in the last `limit` (a
	// failover shorter than that shows only in the fault's own figures).
	fmt.Fprintf(out, "t=%3ds  acked %6.0f/s  failed %d  ack p99 %v  group read %6.0f/s  unavailable now %d (no ack in %v)  in flight %d  %s\n",
		int(now.Sub(l.start).Seconds()), float64(acked)/secs, failed, p99(lat).Round(time.Millisecond), float64(read)/secs, stale, limit, l.inFlight.Load(), fault)
	return to
}

// openTarget starts the own cluster, or attaches to the given one.
func openTarget(ctx context.Context, cfg *Config, out io.Writer) (target, func(), error) {
	if cfg.Bootstrap != "" {
		t := &cmdTarget{cfg: *cfg, bootstrap: strings.Split(cfg.Bootstrap, ",")}
		if cfg.BrokerIDs != "" {
			for _, s := range strings.Split(cfg.BrokerIDs, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(s))
				if err != nil {
					return nil, nil, fmt.Errorf("chaos: --broker-ids: %w", err)
				}
				t.ids = append(t.ids, int32(n))
			}
		}
		return t, func() {}, nil
	}
	dir := cfg.Dir
	removeDir := false
	if dir == "" {
		d, err := os.MkdirTemp("", "weir-chaos-")
		if err != nil {
			return nil, nil, err
		}
		dir, removeDir = d, !cfg.Keep
	}
	fmt.Fprintf(out, "starting 3 controllers and 3 brokers (zones a, b, c) in %s\n", dir)
	var model *nfsfs.Model
	if cfg.FSx != "" {
		p, _ := nfsfs.ProfileByName(cfg.FSx) // checked by Validate
		model = nfsfs.NewModel(p)
		fmt.Fprintf(out, "WAL root served by the lab file system, one mount per broker: %v\n", p)
	}
	c, err := proccluster.Start(ctx, proccluster.Config{Bin: cfg.Bin, Dir: dir, Controllers: 3, Brokers: 3,
		BrokerArgs: cfg.brokerArgs, ControllerArgs: cfg.controllerArgs, FSx: model})
	if err != nil {
		if removeDir {
			os.RemoveAll(dir)
		}
		return nil, nil, err
	}
	return procTarget{c}, func() {
		c.Close()
		if removeDir {
			os.RemoveAll(dir)
		}
	}, nil
}
