// Package cluster wires Weir's components into running nodes: a broker with its
// controller client and gossip (what `weir broker --controllers` runs), and a whole
// cluster of controllers and brokers in one process (what `weir dev` and the tests run).
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/gossip"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/routing"
)

// BrokerNode is a running broker of a cluster.
type BrokerNode struct {
	Broker *broker.Broker
	Client *ctlclient.Client
	Gossip *gossip.Gossip
	log    *slog.Logger

	stopOnce sync.Once
	stopped  chan struct{} // closed by Close or Kill
	mu       sync.Mutex    // Broker while StartBroker sets it (the load report reads it)
	traffic  *routing.Traffic
}

func (n *BrokerNode) broker() *broker.Broker {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.Broker
}

// Drain moves every partition this broker leads to other brokers by graceful moves (the
// controller picks the targets; this broker hands each off as for any move) and returns
// once it leads none, or when ctx ends (the caller then stops anyway: whatever is left
// fails over). A broker that was fenced meanwhile has nothing to drain.
func (n *BrokerNode) Drain(ctx context.Context) error {
	self := n.Broker.Advertised().ID
	again := time.Now()
	for {
		if time.Now().After(again) {
			err := n.Client.DrainBroker(ctx)
			switch {
			case errors.Is(err, metadata.ErrFenced):
				return nil
			case err != nil && ctx.Err() == nil:
				n.log.Warn("draining: asking the controllers failed; retrying", "err", err)
				again = time.Now().Add(500 * time.Millisecond)
			default:
				// Again every few seconds: a move cancelled or refused meanwhile, or a
				// partition that was still recovering, is planned on the next call.
				again = time.Now().Add(3 * time.Second)
			}
		}
		ch := n.Client.Changed()
		left := n.Client.View().PartitionsLedBy(self)
		if left == 0 {
			n.log.Info("drained: this broker leads no partition")
			return nil
		}
		select {
		case <-ch:
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("cluster: drain: %d partitions still led here: %w", left, ctx.Err())
		}
	}
}

// BrokerOptions configures StartBroker.
type BrokerOptions struct {
	Broker      broker.Config
	Client      ctlclient.ClientConfig // Controllers must be set; identity comes from Broker
	Gossip      gossip.Config          // BindAddr "" disables gossip
	Logger      *slog.Logger
	Registerer  prometheus.Registerer
	StopTimeout time.Duration
}

// StartBroker connects to the controllers, opens and replays the broker's WAL, starts the
// Kafka listener (registering the broker, which starts its heartbeats and lease) and joins
// the gossip ring, whose failure suspicions are reported to the controller.
func StartBroker(o BrokerOptions) (*BrokerNode, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	o.Broker.Logger = log
	o.Broker.Registerer = o.Registerer
	if o.Broker.ClusterTokenFile == "" {
		// One cluster token for every connection: the controller API and the other brokers.
		o.Broker.ClusterTokenFile = o.Client.TokenFile
	}
	if err := o.Broker.ValidateCluster(); err != nil {
		return nil, err
	}
	n := &BrokerNode{log: log, stopped: make(chan struct{})}
	if o.Broker.Traffic == nil && o.Registerer != nil {
		// Bytes by peer zone and kind: clients', peer connections', WAL reads', the controllers'
		// and gossip's (weir_traffic_bytes_total).
		n.traffic = routing.NewTraffic(o.Broker.Rack, o.Registerer)
		o.Broker.Traffic = n.traffic
	}
	ccfg := o.Client
	ccfg.BrokerID = o.Broker.NodeID
	ccfg.Rack = o.Broker.Rack
	ccfg.Logger = log.With("component", "controller-client")
	ccfg.DefaultPartitions = o.Broker.DefaultPartitions
	ccfg.LoadReport = func() []metadata.PartitionLoad {
		if b := n.broker(); b != nil {
			return b.LoadReport()
		}
		return nil
	}
	if tr := o.Broker.Traffic; tr != nil {
		// Controllers have no zone, unless --zone-cidrs places their address in one.
		zones := o.Broker.Routing
		ccfg.WrapConn = func(addr string, nc net.Conn) net.Conn {
			zone := routing.UnknownZone
			if ap, err := netip.ParseAddrPort(nc.RemoteAddr().String()); err == nil {
				if z, ok := zones.ZoneOfAddr(ap.Addr()); ok {
					zone = z
				}
			}
			return tr.Conn(nc, zone, routing.KindController)
		}
	}
	ccfg.OnEpochChange = func(old, new int64) {
		log.Warn("broker was fenced and registered again", "old_epoch", old, "new_epoch", new)
		if n.Gossip != nil {
			n.Gossip.UpdateEpoch(new)
		}
	}
	cl, err := ctlclient.NewClient(ccfg)
	if err != nil {
		n.closeTraffic()
		return nil, err
	}
	n.Client = cl
	b, err := broker.New(o.Broker, cl)
	if err != nil {
		cl.Close()
		n.closeTraffic()
		return nil, err
	}
	n.mu.Lock()
	n.Broker = b
	n.mu.Unlock()
	if err := b.Start(); err != nil {
		b.Close()
		cl.Close()
		n.closeTraffic()
		return nil, err
	}
	if o.Gossip.BindAddr != "" {
		gcfg := o.Gossip
		adv := b.Advertised()
		gcfg.BrokerID, gcfg.Zone, gcfg.Epoch = adv.ID, adv.Rack, cl.Epoch()
		gcfg.KafkaAddr = net.JoinHostPort(adv.Host, strconv.Itoa(int(adv.Port)))
		gcfg.Logger = log.With("component", "gossip")
		gcfg.Registerer = o.Registerer
		var g *gossip.Gossip // set before Start, so before Count runs
		if tr := o.Broker.Traffic; tr != nil {
			var counters sync.Map // peer zone → *routing.Counter
			gcfg.Count = func(peer string, out bool, nb int) {
				zone := routing.UnknownZone
				if z, ok := g.PeerZone(peer); ok && z != "" {
					zone = z
				}
				c, ok := counters.Load(zone)
				if !ok {
					c, _ = counters.LoadOrStore(zone, tr.Counter(zone, routing.KindGossip))
				}
				d := routing.In
				if out {
					d = routing.Out
				}
				c.(*routing.Counter).Add(d, nb)
			}
		}
		g, err = gossip.New(gcfg, gossip.Events{OnLeave: func(m gossip.Member) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := cl.ReportSuspect(ctx, m.BrokerID); err != nil {
				log.Warn("reporting suspect broker failed", "suspect", m.BrokerID, "err", err)
			}
		}})
		if err == nil {
			err = g.Start()
		}
		if err != nil {
			n.Close()
			return nil, fmt.Errorf("gossip: %w", err)
		}
		n.Gossip = g
	}
	return n, nil
}

// Addr is the broker's Kafka address.
func (n *BrokerNode) Addr() string { return n.Broker.Addr().String() }

// Fenced is closed when the broker learned its registration is over (its WAL was sealed
// by another broker, or the controller fenced it): the node must be started again, with
// a new registration and a WAL of its own (Cluster and `weir broker` do that).
func (n *BrokerNode) Fenced() <-chan struct{} { return n.Broker.Fenced() }

// Stopped is closed once Close or Kill ran.
func (n *BrokerNode) Stopped() <-chan struct{} { return n.stopped }

func (n *BrokerNode) markStopped() { n.stopOnce.Do(func() { close(n.stopped) }) }

// Close leaves the gossip ring, stops the broker and its controller client.
func (n *BrokerNode) Close() error {
	defer n.markStopped()
	if n.Gossip != nil {
		n.Gossip.Leave(time.Second)
	}
	err := n.Broker.Close()
	n.Client.Close()
	n.closeTraffic()
	return err
}

func (n *BrokerNode) closeTraffic() {
	if n.traffic != nil {
		n.traffic.Close()
	}
}

// Kill stops the broker without leaving the gossip ring, as a crash would look to the
// others (the process itself keeps running, unlike SIGKILL).
func (n *BrokerNode) Kill() {
	defer n.markStopped()
	if n.Gossip != nil {
		n.Gossip.Close()
	}
	n.Client.Close()
	n.Broker.Close()
	n.closeTraffic()
}
