package controller

import (
	"strconv"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/metadata"
)

type metrics struct {
	applyDuration prometheus.Histogram
	apiRequests   *prometheus.CounterVec
	fenced        prometheus.Counter
	forwarded     prometheus.Counter
	failedOver    prometheus.Counter
	recovered     prometheus.Counter
	duplicates    prometheus.Counter
	drains        prometheus.Counter
	balancerMoves *prometheus.CounterVec

	reg  prometheus.Registerer
	cols []prometheus.Collector
}

// unregister removes the metrics so a controller can be restarted on the same registry.
func (m *metrics) unregister() {
	for _, c := range m.cols {
		m.reg.Unregister(c)
	}
}

// newMetrics registers the controller's metrics on reg (labelled with the node ID so
// several controllers can share one registry), or on a private registry when reg is nil.
func newMetrics(reg prometheus.Registerer, c *Controller) (*metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	reg = prometheus.WrapRegistererWith(prometheus.Labels{"controller": strconv.Itoa(int(c.cfg.NodeID))}, reg)
	m := &metrics{
		applyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "weir_controller_apply_duration_seconds",
			Help:    "Time from proposing a command on the leader to its application (commit + FSM).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		apiRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_controller_api_requests_total",
			Help: "Controller API requests by route and answer code.",
		}, []string{"path", "code"}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_controller_brokers_fenced_total",
			Help: "Brokers this controller fenced as leader (lease expiry or suspicion).",
		}),
		forwarded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "weir_controller_api_forwarded_total",
			Help: "API requests this follower forwarded to the leader.",
		}),
	}
	m.failedOver = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "weir_controller_partitions_failed_over_total",
		Help: "Partitions this controller, as leader, gave a new leader (or none, while no broker was active) because their broker was fenced, plus leaderless ones a registering broker took over.",
	})
	m.recovered = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "weir_controller_recoveries_completed_total",
		Help: "Partition recoveries (CompleteRecovery after a failover) this controller, as leader, accepted.",
	})
	m.duplicates = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "weir_controller_duplicate_registrations_total",
		Help: "Broker registrations refused because the ID was in use by a live process.",
	})
	m.drains = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "weir_controller_brokers_drained_total",
		Help: "Broker registrations this controller, as leader, turned draining (graceful shutdown: their partitions move away).",
	})
	m.balancerMoves = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "weir_controller_balancer_moves_total",
		Help: "Graceful moves the balancer began as leader, by reason: drain (off a draining broker), zone (between zones), broker (within a zone).",
	}, []string{"reason"})
	for _, r := range []string{reasonDrain, reasonZone, reasonBroker} {
		m.balancerMoves.WithLabelValues(r)
	}
	cols := []prometheus.Collector{m.applyDuration, m.apiRequests, m.fenced, m.forwarded, m.failedOver, m.recovered, m.duplicates,
		m.drains, m.balancerMoves, leadersCollector{c}}
	for _, st := range []raft.RaftState{raft.Follower, raft.Candidate, raft.Leader, raft.Shutdown} {
		st := st
		cols = append(cols, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "weir_controller_raft_state",
			Help:        "1 for the Raft state this controller is in.",
			ConstLabels: prometheus.Labels{"state": st.String()},
		}, func() float64 {
			if c.raftState() == st {
				return 1
			}
			return 0
		}))
	}
	gauge := func(name, help string, f func() float64) {
		cols = append(cols, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	gauge("weir_controller_raft_term", "Current Raft term.", func() float64 { return float64(c.withRaft(func(r *raft.Raft) uint64 { return r.CurrentTerm() })) })
	gauge("weir_controller_raft_commit_index", "Raft commit index.", func() float64 { return float64(c.withRaft(func(r *raft.Raft) uint64 { return r.CommitIndex() })) })
	gauge("weir_controller_raft_applied_index", "Last Raft index applied to the state machine.", func() float64 {
		return float64(c.withRaft(func(r *raft.Raft) uint64 { return r.AppliedIndex() }))
	})
	gauge("weir_controller_metadata_version", "Version of the metadata state.", func() float64 { return float64(c.fsm.View().Version) })
	gauge("weir_controller_partitions_recovering", "Partitions taken over from a fenced broker whose new leader has not completed recovery yet (not served meanwhile).", func() float64 {
		n, _ := recovering(c.fsm.View())
		return float64(n)
	})
	gauge("weir_controller_partitions_leaderless", "Recovering partitions without a leader: no broker was active when theirs was fenced.", func() float64 {
		_, n := recovering(c.fsm.View())
		return float64(n)
	})
	gauge("weir_controller_balancer_enabled", "1 if the balancer is on (Config.Balance); it runs on the leader.", func() float64 {
		if c.cfg.Balance {
			return 1
		}
		return 0
	})
	gauge("weir_controller_balancer_imbalance", "The most loaded accepting broker's balancer cost over the mean, minus 1, at the last round (leader; 0: even).",
		func() float64 { return c.bal.imbalance() })
	gauge("weir_controller_partitions_moving", "Partitions with a graceful move under way (admin, drain or balancer).",
		func() float64 { return float64(movesInFlight(c.fsm.View())) })
	for _, state := range []metadata.BrokerState{metadata.BrokerActive, metadata.BrokerDraining, metadata.BrokerFenced, metadata.BrokerDecommissioned} {
		state := state
		cols = append(cols, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "weir_controller_brokers",
			Help:        "Registered brokers by state (active, draining, fenced, decommissioned).",
			ConstLabels: prometheus.Labels{"state": string(state)},
		}, func() float64 {
			n := 0
			for _, b := range c.fsm.View().Brokers {
				switch {
				case b.Accepting():
					n += b2i(state == metadata.BrokerActive)
				case b.Draining():
					n += b2i(state == metadata.BrokerDraining)
				case b.Decommissioned():
					n += b2i(state == metadata.BrokerDecommissioned)
				default:
					n += b2i(state == metadata.BrokerFenced)
				}
			}
			return float64(n)
		}))
	}
	m.reg = reg
	for _, col := range cols {
		if err := reg.Register(col); err != nil {
			m.unregister()
			return nil, err
		}
		m.cols = append(m.cols, col)
	}
	return m, nil
}

// recovering counts the Recovering partitions of v, and those of them without a leader.
func recovering(v *metadata.View) (all, leaderless int) {
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			if p.Recovering {
				all++
				if p.Leader < 0 {
					leaderless++
				}
			}
		}
	}
	return all, leaderless
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// leadersCollector exports, at scrape time, how many partitions each live broker leads
// (weir_controller_broker_partitions_led{broker, zone, state}) from this controller's
// View: the spread the balancer works on.
type leadersCollector struct{ c *Controller }

var leadersDesc = prometheus.NewDesc("weir_controller_broker_partitions_led",
	"Partitions each live broker leads (Recovering ones included), by broker, zone and state (active, draining).",
	[]string{"broker", "zone", "state"}, nil)

func (leadersCollector) Describe(ch chan<- *prometheus.Desc) { ch <- leadersDesc }

func (l leadersCollector) Collect(ch chan<- prometheus.Metric) {
	v := l.c.fsm.View()
	n := map[int32]int{}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			n[p.Leader]++
		}
	}
	for _, b := range v.Brokers {
		if !b.Active() {
			continue
		}
		state := metadata.BrokerActive
		if b.Draining() {
			state = metadata.BrokerDraining
		}
		ch <- prometheus.MustNewConstMetric(leadersDesc, prometheus.GaugeValue, float64(n[b.ID]), strconv.Itoa(int(b.ID)), b.Rack, string(state))
	}
}
