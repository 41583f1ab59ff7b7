package ctlwire

import (
	"time"

	"github.com/weir-io/weir/metadata"
)

// BalancerStatus is the body of GET /v1/balancer (answered by the leader).
type BalancerStatus struct {
	// Enabled: the controller's Config.Balance. Controller: the one that answered (the
	// leader), which runs it.
	Enabled    bool  `json:"enabled"`
	Controller int32 `json:"controller"`
	MaxMoves   int   `json:"max_moves"`
	IntervalMs int64 `json:"interval_ms"`
	CooldownMs int64 `json:"cooldown_ms"`
	// MovesInFlight counts the partitions moving now (any cause).
	MovesInFlight int `json:"moves_in_flight"`
	// MovesTotal counts the moves the balancer began while this controller led.
	MovesTotal uint64 `json:"moves_total"`
	// Imbalance, Brokers and Decision are what a round would see and decide now, from
	// the View of version ViewVersion (nothing is proposed): the brokers' states are the
	// View's, as `weir admin describe` shows them, and Decision explains the imbalance
	// (why it is left, when nothing would move). Imbalance is the most loaded accepting
	// broker's cost over the accepting brokers' mean, minus 1.
	ViewVersion uint64          `json:"view_version"`
	Imbalance   float64         `json:"imbalance"`
	Decision    string          `json:"decision,omitempty"`
	Brokers     []BrokerBalance `json:"brokers,omitempty"`
	// LastRound is when the last round decided (zero before the first); LastDecision
	// summarises it and LastMoves lists its moves.
	LastRound    time.Time     `json:"last_round,omitempty"`
	LastDecision string        `json:"last_decision,omitempty"`
	LastMoves    []BalanceMove `json:"last_moves,omitempty"`
	// ReportedPartitions counts the partitions with a reported rate.
	ReportedPartitions int `json:"reported_partitions"`
}

// StateOf is b's state as the admin tools show it: its State, BrokerActive when empty
// (the zero value means active). `weir admin status` (the balancer's brokers) and
// `describe` both show this, so they cannot disagree.
func StateOf(b metadata.Broker) metadata.BrokerState {
	if b.State == "" {
		return metadata.BrokerActive
	}
	return b.State
}

// BalanceMove is one move the balancer decided.
type BalanceMove struct {
	Topic     string           `json:"topic"`
	TopicID   metadata.TopicID `json:"-"`
	Partition int32            `json:"partition"`
	From      int32            `json:"from"`
	To        int32            `json:"to"`
	// Reason is "drain" (off a draining broker), "zone" (between zones) or "broker"
	// (within a zone).
	Reason string  `json:"reason"`
	Cost   float64 `json:"cost"`
	// Error is why the proposal failed (empty: the move began).
	Error string `json:"error,omitempty"`
}

// BrokerBalance is one broker as the balancer saw it.
type BrokerBalance struct {
	ID   int32  `json:"id"`
	Rack string `json:"rack,omitempty"`
	// State is StateOf the broker: never empty.
	State metadata.BrokerState `json:"state"`
	// Leads counts the partitions it leads; Cost is what the balancer weighs (moves
	// under way counted at their target; 0 for a draining broker); BytesPerSec sums the
	// reported rates of the partitions it leads.
	Leads       int     `json:"leads"`
	Cost        float64 `json:"cost"`
	BytesPerSec int64   `json:"bytes_per_sec"`
}
