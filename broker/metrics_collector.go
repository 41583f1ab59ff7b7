package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/broker/group"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/broker/peer"
	"github.com/weir-io/weir/metadata"
)

// brokerCollector computes, at scrape time, what is cheaper to read than to keep counting:
// the partitions this broker leads, the consumer groups it coordinates by state, and their
// lag (high watermark minus committed offset) per partition.
//
// A group's committed offsets live on its coordinator, but the partitions it consumes may
// be led by other brokers, whose high watermarks only they know. The coordinator reads
// the high watermarks of its own partitions directly and asks the other leaders with one
// peer OpOffsets request per leader per scrape, over the brokers' authenticated
// connections, bounded by lagLookupTimeout; partitions it cannot get are left out of
// that scrape and counted in weir_broker_consumer_group_lag_lookup_failures_total. So
// every lag series comes from exactly one broker: the group's coordinator.
type brokerCollector struct {
	b        *Broker
	failures prometheus.Counter

	partitionsLed *prometheus.Desc
	groups        *prometheus.Desc
	lag           *prometheus.Desc
}

// lagLookupTimeout bounds the remote high-watermark lookup of one scrape.
const lagLookupTimeout = 2 * time.Second

// groupStates are always exported (as 0 when no group is in them), so dashboards and
// alerts see a series before the first group appears.
var groupStates = []string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable"}

func newBrokerCollector(b *Broker, failures prometheus.Counter) *brokerCollector {
	return &brokerCollector{
		b:        b,
		failures: failures,
		partitionsLed: prometheus.NewDesc("weir_broker_partitions_led",
			"Partitions this broker leads according to the metadata (loading and handing off included).", nil, nil),
		groups: prometheus.NewDesc("weir_broker_consumer_groups",
			"Consumer groups this broker coordinates, by state.", []string{"state"}, nil),
		lag: prometheus.NewDesc("weir_broker_consumer_group_lag",
			"Records between a partition's high watermark and the group's committed offset (exported by the group's coordinator; 0 when the commit is at or past the end).",
			[]string{"group", "topic", "partition"}, nil),
	}
}

func (c *brokerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.partitionsLed
	ch <- c.groups
	ch <- c.lag
}

func (c *brokerCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	ch <- prometheus.MustNewConstMetric(c.partitionsLed, prometheus.GaugeValue, float64(b.parts.Len()))

	infos := b.groups.Groups()
	byState := make(map[string]int, len(groupStates))
	for _, s := range groupStates {
		byState[s] = 0
	}
	for _, g := range infos {
		byState[g.State]++
	}
	for s, n := range byState {
		ch <- prometheus.MustNewConstMetric(c.groups, prometheus.GaugeValue, float64(n), s)
	}
	c.collectLag(ch, infos)
}

type topicPartition struct {
	topic     string
	partition int32
}

type lagEntry struct {
	group     string
	tp        topicPartition
	committed int64
}

func (c *brokerCollector) collectLag(ch chan<- prometheus.Metric, infos []group.GroupInfo) {
	b := c.b
	var entries []lagEntry
	for _, g := range infos {
		for topic, ps := range b.groups.Committed(g.Name) {
			for p, o := range ps {
				if o.Offset >= 0 {
					entries = append(entries, lagEntry{g.Name, topicPartition{topic, p}, o.Offset})
				}
			}
		}
	}
	if len(entries) == 0 {
		return
	}
	view := b.meta.View()
	hws := make(map[topicPartition]int64, len(entries))
	var remote []topicPartition
	for _, e := range entries {
		if _, ok := hws[e.tp]; ok {
			continue
		}
		t := view.Topics[e.tp.topic]
		if t == nil || e.tp.partition < 0 || int(e.tp.partition) >= len(t.Partitions) {
			continue // deleted since the commit: no lag to speak of
		}
		p := b.parts.Get(t.ID, e.tp.partition)
		if p == nil {
			if t.Partitions[e.tp.partition].Leader != b.cfg.NodeID {
				hws[e.tp] = -1 // placeholder: ask its leader
				remote = append(remote, e.tp)
			}
			continue
		}
		st := p.State()
		_, hw := p.Offsets()
		if st == partlog.Ready || st == partlog.Closing {
			hws[e.tp] = hw
		} // loading: its high watermark is not known yet
	}
	if len(remote) > 0 {
		got, err := c.remoteHighWatermarks(remote)
		if err != nil {
			b.log.Debug("consumer group lag: high watermarks of other leaders", "err", err)
		}
		if err != nil || len(got) < len(remote) {
			c.failures.Inc()
		}
		for _, tp := range remote {
			if hw, ok := got[tp]; ok {
				hws[tp] = hw
			} else {
				delete(hws, tp)
			}
		}
	}
	for _, e := range entries {
		hw, ok := hws[e.tp]
		if !ok {
			continue
		}
		lag := hw - e.committed
		if lag < 0 {
			lag = 0
		}
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(lag),
			e.group, e.tp.topic, strconv.Itoa(int(e.tp.partition)))
	}
}

// remoteHighWatermarks asks the partitions' leaders for their high watermarks, over the
// brokers' own authenticated connections (peer OpOffsets), as any inter-broker request: a
// Kafka client dialing the listeners would need the listeners' TLS and SASL, which a
// secure cluster's brokers do not have for themselves. Partitions that fail are missing
// from the map.
func (c *brokerCollector) remoteHighWatermarks(tps []topicPartition) (map[topicPartition]int64, error) {
	b := c.b
	if b.proxy == nil {
		return nil, errors.New("broker: no connections to other brokers")
	}
	v := b.meta.View()
	byLeader := map[int32][]topicPartition{}
	for _, tp := range tps {
		if t := v.Topics[tp.topic]; t != nil && int(tp.partition) < len(t.Partitions) {
			l := t.Partitions[tp.partition].Leader
			byLeader[l] = append(byLeader[l], tp)
		}
	}
	ctx, cancel := context.WithTimeout(b.ctx, lagLookupTimeout)
	defer cancel()
	out := map[topicPartition]int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	for l, ps := range byLeader {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.askOffsets(ctx, v, l, ps)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("broker %d: %w", l, err))
			}
			for tp, hw := range got {
				out[tp] = hw
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// askOffsets asks leader l for the high watermarks of ps.
func (c *brokerCollector) askOffsets(ctx context.Context, v *metadata.View, l int32, ps []topicPartition) (map[topicPartition]int64, error) {
	cl, err := c.b.proxy.client(v, l)
	if err != nil {
		return nil, err
	}
	refs := make([]peer.PartitionRef, len(ps))
	for i, tp := range ps {
		refs[i] = peer.PartitionRef{Topic: v.Topics[tp.topic].ID, Partition: tp.partition}
	}
	resp, err := cl.Call(ctx, peer.AppendOffsetsRequest(nil, refs))
	if err != nil {
		return nil, err
	}
	offs, err := peer.DecodeOffsets(resp, len(refs))
	if err != nil {
		return nil, err
	}
	out := map[topicPartition]int64{}
	for i, o := range offs {
		if o.Code == 0 && o.HW >= 0 {
			out[ps[i]] = o.HW
		}
	}
	return out, nil
}

// close releases nothing: the peer connections belong to the broker.
func (c *brokerCollector) close() {}
