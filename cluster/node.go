// Package cluster wires Weir's components into running nodes: a broker with its
// controller client and gossip (what `weir broker --controllers` runs), and a whole
// cluster of controllers and brokers in one process (what `weir dev` and the tests run).
package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/controller"
	"github.com/weir-io/weir/gossip"
)

// BrokerNode is a running broker of a cluster.
type BrokerNode struct {
	Broker *broker.Broker
	Client *controller.Client
	Gossip *gossip.Gossip
	log    *slog.Logger

	stopOnce sync.Once
	stopped  chan struct{} // closed by Close or Kill
}

// BrokerOptions configures StartBroker.
type BrokerOptions struct {
	Broker      broker.Config
	Client      controller.ClientConfig // Controllers must be set; identity comes from Broker
	Gossip      gossip.Config           // BindAddr "" disables gossip
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
	ccfg := o.Client
	ccfg.BrokerID = o.Broker.NodeID
	ccfg.Rack = o.Broker.Rack
	ccfg.Logger = log.With("component", "controller-client")
	ccfg.DefaultPartitions = o.Broker.DefaultPartitions
	n := &BrokerNode{log: log, stopped: make(chan struct{})}
	ccfg.OnEpochChange = func(old, new int64) {
		log.Warn("broker was fenced and registered again", "old_epoch", old, "new_epoch", new)
		if n.Gossip != nil {
			n.Gossip.UpdateEpoch(new)
		}
	}
	cl, err := controller.NewClient(ccfg)
	if err != nil {
		return nil, err
	}
	n.Client = cl
	b, err := broker.New(o.Broker, cl)
	if err != nil {
		cl.Close()
		return nil, err
	}
	n.Broker = b
	if err := b.Start(); err != nil {
		b.Close()
		cl.Close()
		return nil, err
	}
	if o.Gossip.BindAddr != "" {
		gcfg := o.Gossip
		adv := b.Advertised()
		gcfg.BrokerID, gcfg.Zone, gcfg.Epoch = adv.ID, adv.Rack, cl.Epoch()
		gcfg.KafkaAddr = net.JoinHostPort(adv.Host, strconv.Itoa(int(adv.Port)))
		gcfg.Logger = log.With("component", "gossip")
		gcfg.Registerer = o.Registerer
		g, err := gossip.New(gcfg, gossip.Events{OnLeave: func(m gossip.Member) {
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
	return err
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
}
