package ctlclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// CreateTopic implements metadata.Store. The client picks the topic's UUID, so a retry
// of a create that was applied although its answer was lost succeeds with that topic.
func (c *Client) CreateTopic(ctx context.Context, spec metadata.TopicSpec, validateOnly bool) (*metadata.Topic, error) {
	n := spec.Partitions
	if n == -1 && c.cfg.DefaultPartitions > 0 {
		n = c.cfg.DefaultPartitions
	}
	req := ctlwire.CreateTopicRequest{
		Name:              spec.Name,
		Partitions:        n,
		ReplicationFactor: spec.ReplicationFactor,
		Configs:           spec.Configs,
		ValidateOnly:      validateOnly,
		ID:                metadata.NewTopicID(),
	}
	var resp ctlwire.TopicResponse
	if info, err := c.call(ctx, http.MethodPost, ctlwire.PathTopics, req, &resp); err != nil {
		// An attempt that failed may have been applied (a slow controller answered too
		// late): the topic then exists with this request's ID, and the create worked.
		// Without this check the client's retry would be told TOPIC_ALREADY_EXISTS
		// about its own topic.
		if info.ambiguous && !validateOnly && c.refreshConsistent(ctx) == nil {
			if t := c.View().Topics[spec.Name]; t != nil && t.ID == req.ID {
				return t, nil
			}
		}
		return nil, err
	}
	if resp.Topic == nil {
		return nil, fmt.Errorf("%w: create answered without a topic", ctlwire.ErrUnavailable)
	}
	if !validateOnly {
		c.waitVersion(ctx, resp.Version)
	}
	return resp.Topic, nil
}

// DeleteTopic implements metadata.Store.
func (c *Client) DeleteTopic(ctx context.Context, name string) (*metadata.Topic, error) {
	before := c.View().Topics[name]
	var resp ctlwire.TopicResponse
	info, err := c.call(ctx, http.MethodDelete, ctlwire.TopicPath(ctlwire.PathTopic, name), nil, &resp)
	if err != nil {
		if info.ambiguous && before != nil && errors.Is(err, metadata.ErrUnknownTopic) {
			// An earlier attempt may have deleted it: check the leader's view.
			if c.refreshConsistent(ctx) == nil {
				if t := c.View().Topics[name]; t == nil || t.ID != before.ID {
					return before, nil
				}
			}
		}
		return nil, err
	}
	c.waitVersion(ctx, resp.Version)
	return resp.Topic, nil
}

// CreatePartitions implements metadata.Store.
func (c *Client) CreatePartitions(ctx context.Context, name string, total int32, validateOnly bool) error {
	var resp ctlwire.VersionResponse
	info, err := c.call(ctx, http.MethodPost, ctlwire.TopicPath(ctlwire.PathTopicPartitions, name), ctlwire.CreatePartitionsRequest{Total: total, ValidateOnly: validateOnly}, &resp)
	if err != nil {
		if info.ambiguous && !validateOnly && errors.Is(err, metadata.ErrInvalidPartitions) && c.refreshConsistent(ctx) == nil {
			if t := c.View().Topics[name]; t != nil && int32(len(t.Partitions)) == total {
				return nil // an earlier attempt did it
			}
		}
		return err
	}
	if !validateOnly {
		c.waitVersion(ctx, resp.Version)
	}
	return nil
}

// AlterTopicConfigs implements metadata.Store.
func (c *Client) AlterTopicConfigs(ctx context.Context, name string, ops []metadata.ConfigOp, validateOnly bool) error {
	req := ctlwire.AlterConfigsRequest{ValidateOnly: validateOnly, Ops: make([]ctlwire.ConfigOpJSON, len(ops))}
	for i, op := range ops {
		req.Ops[i] = ctlwire.ConfigOpJSON{Key: op.Key, Op: int8(op.Op), Value: op.Value}
	}
	var resp ctlwire.VersionResponse
	if _, err := c.call(ctx, http.MethodPost, ctlwire.TopicPath(ctlwire.PathTopicConfigs, name), req, &resp); err != nil {
		return err
	}
	if !validateOnly {
		c.waitVersion(ctx, resp.Version)
	}
	return nil
}

// SetLogStartOffset implements metadata.Store (the offset only moves forward).
func (c *Client) SetLogStartOffset(ctx context.Context, id metadata.TopicID, partition int32, offset int64) error {
	var resp ctlwire.VersionResponse
	if _, err := c.call(ctx, http.MethodPost, ctlwire.PathLogStart, ctlwire.LogStartRequest{TopicID: id, Partition: partition, Offset: offset}, &resp); err != nil {
		return err
	}
	c.waitVersion(ctx, resp.Version)
	return nil
}

// AllocateProducerID implements metadata.Store: IDs come from blocks reserved through
// Raft, so they never repeat across brokers or restarts (a restart abandons the rest of
// its block).
func (c *Client) AllocateProducerID(ctx context.Context) (int64, error) {
	c.pidMu.Lock()
	defer c.pidMu.Unlock()
	if c.pidNext >= c.pidEnd {
		var resp ctlwire.ProducerIDsResponse
		if _, err := c.call(ctx, http.MethodPost, ctlwire.PathProducerIDs, ctlwire.ProducerIDsRequest{Count: c.cfg.ProducerIDBlock}, &resp); err != nil {
			return 0, err
		}
		if resp.Count <= 0 {
			return 0, fmt.Errorf("%w: empty producer id block", ctlwire.ErrUnavailable)
		}
		c.pidNext, c.pidEnd = resp.First, resp.First+resp.Count
	}
	id := c.pidNext
	c.pidNext++
	return id, nil
}

// RegisterBroker implements metadata.Registrar: it registers b (a new epoch, state
// active) and starts heartbeating every HeartbeatInterval. While the broker ID is in use
// by another live process (metadata.ErrDuplicateBroker: another incarnation's lease is
// fresh), it retries with backoff until ctx ends; a restart after a crash waits for the
// dead process's lease to run out, about a second. It fails if the granted lease is
// shorter than twice HeartbeatInterval (the broker is registered then, but holds no
// lease and does not heartbeat). The lease is valid once this client's View includes
// the registration.
//
// When a heartbeat is answered "fenced" the client drops its lease and closes the
// channel Fenced returned; it does not register again by itself: the broker restarts
// its storage (a new WAL for the new epoch) and calls RegisterBroker again.
func (c *Client) RegisterBroker(ctx context.Context, b metadata.Broker) error {
	if b.ID < 0 {
		return fmt.Errorf("%w: broker id %d", ctlwire.ErrBadRequest, b.ID)
	}
	c.regMu.Lock()
	defer c.regMu.Unlock()
	c.self = metadata.Broker{ID: b.ID, Host: b.Host, Port: b.Port, Rack: b.Rack, Listeners: slices.Clone(b.Listeners)}
	c.selfID.Store(b.ID)
	backoff := 100 * time.Millisecond
	var dup error // the last refusal as a duplicate
	for refused := 0; ; refused++ {
		err := c.register(ctx)
		if err == nil {
			break
		}
		if dup != nil && ctx.Err() != nil {
			// The wait for the other process's lease ran out during an attempt: its
			// refusal says why, not the attempt cut short.
			return fmt.Errorf("%w (gave up: %v)", dup, ctx.Err())
		}
		if !errors.Is(err, metadata.ErrDuplicateBroker) {
			return err
		}
		dup = err
		if refused == 0 {
			c.log.Warn("broker ID in use by a live process; waiting for its lease to run out", "broker", b.ID, "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %v)", err, ctx.Err())
		case <-c.ctx.Done():
			return ErrClosed
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
	c.hbOnce.Do(func() {
		for i := range c.cfg.Controllers {
			c.wg.Add(1)
			go c.heartbeatLoop(i)
		}
	})
	return nil
}

// register sends the registration; callers hold regMu.
func (c *Client) register(ctx context.Context) error {
	send := c.leaseClock()
	var resp ctlwire.LeaseResponse
	req := ctlwire.RegisterRequest{ID: c.self.ID, Host: c.self.Host, Port: c.self.Port, Rack: c.self.Rack, Listeners: c.self.Listeners, Incarnation: c.incarnation}
	if _, err := c.call(ctx, http.MethodPost, ctlwire.PathRegister, req, &resp); err != nil {
		return err
	}
	lease := time.Duration(resp.LeaseTimeoutMs) * time.Millisecond
	if lease <= 0 {
		lease = c.cfg.LeaseTimeout
	}
	voters := max(resp.Voters, 1)
	ok := lease >= 2*c.cfg.HeartbeatInterval
	c.leaseMu.Lock()
	old := c.epoch.Swap(resp.Epoch)
	// The leader acknowledged the registration like a heartbeat; the lease needs a
	// majority, so it counts once a follower acknowledged a heartbeat too, and once
	// this client's View has the registration (regVersion).
	c.acks = map[int32]time.Duration{resp.NodeID: send + lease}
	c.voters, c.hasAck = voters, ok
	c.leaseDur = lease
	c.regVersion = resp.Version
	if c.hbKick != nil {
		close(c.hbKick)
	}
	c.hbKick = make(chan struct{})
	if c.fencedEpoch != 0 {
		c.fenced, c.fencedEpoch = make(chan struct{}), 0 // a new registration, a new channel
	}
	c.leaseMu.Unlock()
	if !ok {
		return fmt.Errorf("%w: the controllers grant a lease of %v, less than twice this broker's heartbeat interval %v: "+
			"lower the heartbeat interval or raise the controllers' lease settings (broker %d is registered in epoch %d without a lease)",
			ErrBadConfig, lease, c.cfg.HeartbeatInterval, c.self.ID, resp.Epoch)
	}
	if need := voters/2 + 1; len(c.cfg.Controllers) < need {
		return fmt.Errorf("%w: the lease needs acknowledgements of %d of the %d controllers, and this broker knows only %d address(es) (%s): "+
			"list every controller (broker %d is registered in epoch %d)", ErrBadConfig, need, voters, len(c.cfg.Controllers),
			strings.Join(c.cfg.Controllers, ","), c.self.ID, resp.Epoch)
	}
	c.log.Info("registered with the controllers", "broker", c.self.ID, "epoch", resp.Epoch, "previous_epoch", old, "lease", lease,
		"controllers", voters, "incarnation", c.incarnation)
	c.waitVersion(ctx, resp.Version)
	if old != 0 && c.cfg.OnEpochChange != nil {
		c.cfg.OnEpochChange(old, resp.Epoch)
	}
	return nil
}

// heartbeatLoop heartbeats one controller (by index in ClientConfig.Controllers) every
// HeartbeatInterval, from registration until the client closes: each controller on
// its own, so one that is slow, dead or partitioned costs the others nothing, and the
// lease holds while a majority answers.
func (c *Client) heartbeatLoop(idx int) {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.HeartbeatInterval)
	defer t.Stop()
	var lastLoad time.Duration
	for {
		if !c.hbPaused.Load() {
			if sent, ok := c.heartbeat(idx, lastLoad); ok {
				lastLoad = sent
			}
		}
		c.leaseMu.Lock()
		kick := c.hbKick
		c.leaseMu.Unlock()
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		case <-kick: // a new registration: its lease needs a majority at once
		}
	}
}

// heartbeat sends one heartbeat to controller idx; it reports the send time and
// whether the heartbeat carried a load report that was acknowledged.
func (c *Client) heartbeat(idx int, lastLoad time.Duration) (time.Duration, bool) {
	c.leaseMu.Lock()
	epoch := c.epoch.Load()
	over := epoch == c.fencedEpoch
	c.leaseMu.Unlock()
	if over || epoch == 0 {
		return 0, false // fenced: nothing to renew until RegisterBroker
	}
	req := ctlwire.HeartbeatRequest{ID: c.selfID.Load(), Epoch: epoch, Incarnation: c.incarnation}
	send := c.leaseClock()
	if c.cfg.LoadReport != nil && send-lastLoad >= c.cfg.LoadReportInterval {
		req.LoadReport, req.Load = true, compactLoad(c.cfg.LoadReport())
	}
	body, err := json.Marshal(req)
	if err != nil {
		return 0, false
	}
	addr := c.cfg.Controllers[idx]
	// Longer than the lease: a request given up closes its connection, which the
	// controller would take for a hint that this process died.
	status, rb, err := c.attemptWith(c.hb, c.ctx, addr, http.MethodPost, ctlwire.PathHeartbeat, body, max(time.Second, 4*c.cfg.HeartbeatInterval))
	var resp ctlwire.LeaseResponse
	if err == nil {
		if status/100 == 2 {
			err = json.Unmarshal(rb, &resp)
		} else {
			var ae ctlwire.APIError
			if json.Unmarshal(rb, &ae) != nil || ae.Code == "" {
				ae = ctlwire.APIError{Code: "internal", Message: fmt.Sprintf("HTTP %d: %.200s", status, rb)}
			}
			err = ae.ToError()
		}
	}
	switch {
	case err == nil:
		c.leaseMu.Lock()
		defer c.leaseMu.Unlock()
		if resp.Epoch != c.epoch.Load() || c.fencedEpoch == resp.Epoch || !c.hasAck {
			return send, req.LoadReport
		}
		lease := time.Duration(resp.LeaseTimeoutMs) * time.Millisecond
		if lease <= 0 {
			lease = c.cfg.LeaseTimeout
		}
		if end := send + lease; end > c.acks[resp.NodeID] {
			c.acks[resp.NodeID] = end
		}
		if resp.Voters > 0 {
			c.voters = resp.Voters
		}
		c.leaseDur = lease
		return send, req.LoadReport
	case errors.Is(err, metadata.ErrFenced):
		c.leaseMu.Lock()
		defer c.leaseMu.Unlock()
		if c.epoch.Load() != epoch || c.fencedEpoch == epoch {
			return 0, false // registered again meanwhile, or already known
		}
		c.hasAck = false // stop acking now
		c.fencedEpoch = epoch
		close(c.fenced)
		c.log.Warn("the controllers fenced this broker: its registration is over; the broker must restart its storage and register again",
			"broker", c.selfID.Load(), "epoch", epoch, "controller", addr, "err", err)
	default:
		if c.ctx.Err() == nil {
			c.log.Debug("heartbeat failed", "broker", c.selfID.Load(), "epoch", epoch, "controller", addr, "err", err)
		}
	}
	return 0, false
}

// compactLoad keeps the partitions with traffic, the ctlwire.MaxLoadReport hottest.
func compactLoad(in []metadata.PartitionLoad) []metadata.PartitionLoad {
	out := make([]metadata.PartitionLoad, 0, len(in))
	for _, l := range in {
		if l.BytesPerSec > 0 {
			out = append(out, l)
		}
	}
	if len(out) > ctlwire.MaxLoadReport {
		sort.Slice(out, func(i, j int) bool { return out[i].BytesPerSec > out[j].BytesPerSec })
		out = out[:ctlwire.MaxLoadReport]
	}
	return out
}

// DrainBroker implements metadata.Drainer: it drains this broker's current registration
// (POST /v1/brokers/drain): the broker turns draining and every partition it leads that
// is not recovering begins a graceful move to another broker (its zone first); the
// balancer moves the rest once recovered. The broker goes on heartbeating and serving,
// completes each hand-off (CompleteMoveGen) and may exit once it leads nothing
// (View().PartitionsLedBy). Draining again is harmless. metadata.ErrFenced when the
// registration is over (or there is none). On return the View shows the drain.
func (c *Client) DrainBroker(ctx context.Context) error {
	epoch := c.epoch.Load()
	if epoch == 0 {
		return fmt.Errorf("%w: broker %d is not registered", metadata.ErrFenced, c.selfID.Load())
	}
	_, err := c.DrainRegistration(ctx, c.selfID.Load(), epoch)
	return err
}

// DrainRegistration drains broker id's registration epoch (admin tools; a broker uses
// DrainBroker). On return this client's View shows the drain.
func (c *Client) DrainRegistration(ctx context.Context, id int32, epoch int64) (ctlwire.DrainResponse, error) {
	var resp ctlwire.DrainResponse
	if _, err := c.call(ctx, http.MethodPost, ctlwire.PathDrain, ctlwire.DrainRequest{ID: id, Epoch: epoch}, &resp); err != nil {
		return resp, err
	}
	c.waitVersion(ctx, resp.Version)
	return resp, nil
}

// UndrainRegistration takes broker id's registration epoch out of draining (admin
// tools): it may be given partitions again. A registration that is not draining is no
// change; metadata.ErrFenced when it is not the current, live one. On return this
// client's View shows it.
func (c *Client) UndrainRegistration(ctx context.Context, id int32, epoch int64) error {
	var resp ctlwire.VersionResponse
	if _, err := c.call(ctx, http.MethodPost, ctlwire.PathUndrain, ctlwire.DrainRequest{ID: id, Epoch: epoch}, &resp); err != nil {
		return err
	}
	c.waitVersion(ctx, resp.Version)
	return nil
}

// Decommission retires broker id, a fenced broker that leads nothing, for good (admin
// tools): metadata.ErrUnknownBroker for an ID never registered, metadata.ErrBrokerState
// for a live broker or one that still leads partitions. On return this client's View
// shows it.
func (c *Client) Decommission(ctx context.Context, id int32) error {
	var resp ctlwire.VersionResponse
	if _, err := c.call(ctx, http.MethodPost, ctlwire.PathDecommission, ctlwire.DecommissionRequest{ID: id}, &resp); err != nil {
		return err
	}
	c.waitVersion(ctx, resp.Version)
	return nil
}

// Draining implements metadata.Drainer: whether this client's View shows the broker's
// current registration draining.
func (c *Client) Draining() bool {
	b, ok := c.View().Broker(c.selfID.Load())
	return ok && b.Epoch == c.epoch.Load() && b.Draining()
}

// Balancer returns the balancer's state from the controller leader (GET /v1/balancer).
func (c *Client) Balancer(ctx context.Context) (ctlwire.BalancerStatus, error) {
	var st ctlwire.BalancerStatus
	_, err := c.call(ctx, http.MethodGet, ctlwire.PathBalancer, nil, &st)
	return st, err
}

// Epoch implements metadata.Leaser: the current registration epoch (0 before).
func (c *Client) Epoch() int64 { return c.epoch.Load() }

// Incarnation is this client's random process identity, sent with its registrations
// and heartbeats.
func (c *Client) Incarnation() string { return c.incarnation }

// Fenced implements metadata.Leaser: a channel closed when a heartbeat of the current
// registration is answered "fenced". The client does not register again by itself; a
// later RegisterBroker starts a new registration, whose channel Fenced then returns.
func (c *Client) Fenced() <-chan struct{} {
	c.leaseMu.Lock()
	defer c.leaseMu.Unlock()
	return c.fenced
}

// LeaseValid implements metadata.Leaser: true while a majority of the controllers
// granted a lease that has not ended: each counted from the send time of the last
// heartbeat (or registration) that controller acknowledged, measured on the lease
// clock (CLOCK_BOOTTIME on Linux, so a paused VM wakes up with its lease run out); now
// is mapped onto that clock through the monotonic clock, so time.Now() asks about the
// present. False before registering, after a fence, and until this client's View
// includes the registration (so the broker never acks from an older View that
// predates it). No fence can be committed before the lease ends (controller/leases.go), so a
// broker that checks LeaseValid before acking stops acking before it can be fenced.
func (c *Client) LeaseValid(now time.Time) bool {
	at := c.leaseClock() + time.Until(now)
	have := c.viewVersion.Load()
	c.leaseMu.Lock()
	defer c.leaseMu.Unlock()
	return c.hasAck && have >= c.regVersion && c.leaseEndLocked() > at
}

// leaseEndLocked is when the lease ends on the lease clock: the majority-th latest of
// the controllers' ends (0 without a majority). leaseMu is held.
func (c *Client) leaseEndLocked() time.Duration {
	need := max(c.voters, 1)/2 + 1
	if len(c.acks) < need {
		return 0
	}
	// Every produce and every ack asks (leaseOK): no allocation for the usual 3 or 5
	// controllers.
	var buf [8]time.Duration
	ends := buf[:0]
	for _, e := range c.acks {
		ends = append(ends, e)
	}
	slices.Sort(ends)
	return ends[len(ends)-need]
}

// SinceLeaseAck is how long before now the lease was last renewed: now minus (the
// lease's end minus the lease granted); ok is false before the first majority (broker
// logs).
func (c *Client) SinceLeaseAck(now time.Time) (d time.Duration, ok bool) {
	at := c.leaseClock() + time.Until(now)
	c.leaseMu.Lock()
	defer c.leaseMu.Unlock()
	end := c.leaseEndLocked()
	return at - (end - c.leaseDur), c.hasAck && end > 0
}

// ReportSuspect implements metadata.Leaser.
func (c *Client) ReportSuspect(ctx context.Context, id int32) error {
	_, err := c.call(ctx, http.MethodPost, ctlwire.PathSuspect, ctlwire.SuspectRequest{ID: id, Reporter: c.selfID.Load()}, nil)
	return err
}

// MovePartition implements metadata.Mover.
func (c *Client) MovePartition(ctx context.Context, id metadata.TopicID, partition int32, target int32) error {
	var resp ctlwire.VersionResponse
	if _, err := c.call(ctx, http.MethodPost, ctlwire.PathMove, ctlwire.MoveRequest{TopicID: id, Partition: partition, Target: target}, &resp); err != nil {
		return err
	}
	c.waitVersion(ctx, resp.Version)
	return nil
}

// CompleteMove implements metadata.Mover: this broker (the current leader, in its
// current epoch) hands the partition to the move's target from endOffset on, whatever
// move is pending.
//
// Deprecated: use CompleteMoveGen; a retried CompleteMove can complete a later move
// with this one's end offset.
func (c *Client) CompleteMove(ctx context.Context, id metadata.TopicID, partition int32, endOffset int64) error {
	return c.CompleteMoveGen(ctx, id, partition, endOffset, 0)
}

// CompleteMoveGen implements metadata.Mover: like CompleteMove, but only for the move
// moveGen (the Partition.MoveGen the broker captured endOffset for); 0 completes
// whatever move is pending. A retry of a completion that was applied although its
// answer was lost succeeds.
func (c *Client) CompleteMoveGen(ctx context.Context, id metadata.TopicID, partition int32, endOffset int64, moveGen uint64) error {
	self := c.selfID.Load()
	req := ctlwire.CompleteMoveRequest{TopicID: id, Partition: partition, From: self, FromEpoch: c.epoch.Load(), EndOffset: endOffset, MoveGen: moveGen}
	var resp ctlwire.VersionResponse
	info, err := c.call(ctx, http.MethodPost, ctlwire.PathCompleteMove, req, &resp)
	if err != nil {
		if info.ambiguous && errors.Is(err, metadata.ErrMoveRefused) && c.refreshConsistent(ctx) == nil && c.handedOff(id, partition, endOffset) {
			return nil // an earlier attempt completed it
		}
		return err
	}
	c.waitVersion(ctx, resp.Version)
	return nil
}

// handedOff reports whether this client's View shows partition of id handed from this
// broker to its current leader at endOffset: what an earlier attempt of a completion
// whose answer was lost did.
func (c *Client) handedOff(id metadata.TopicID, partition int32, endOffset int64) bool {
	self := c.selfID.Load()
	t := c.View().TopicByID(id)
	if t == nil || partition < 0 || int(partition) >= len(t.Partitions) {
		return false
	}
	p := t.Partitions[partition]
	n := len(p.Logs)
	return p.Leader != self && n >= 2 && p.Logs[n-1].Broker == p.Leader && p.Logs[n-1].StartOffset == endOffset && p.Logs[n-2].Broker == self
}

// CompleteMovesGen implements metadata.BatchMover: CompleteMoveGen for many partitions
// in one request and one Raft entry (at most 4096 per request; more are sent in several).
func (c *Client) CompleteMovesGen(ctx context.Context, done []metadata.MoveDone) ([]error, error) {
	errs := make([]error, 0, len(done))
	for len(done) > 0 {
		n := min(len(done), ctlwire.MaxMovesPerRequest)
		req := ctlwire.CompleteMovesRequest{From: c.selfID.Load(), FromEpoch: c.epoch.Load(), Items: make([]ctlwire.MoveDoneItem, n)}
		for i, d := range done[:n] {
			req.Items[i] = ctlwire.MoveDoneItem{TopicID: d.Topic, Partition: d.Partition, EndOffset: d.EndOffset, MoveGen: d.MoveGen}
		}
		var resp ctlwire.CompleteMovesResponse
		info, err := c.call(ctx, http.MethodPost, ctlwire.PathCompleteMoves, req, &resp)
		if err != nil {
			return nil, err
		}
		if len(resp.Errors) != n {
			return nil, fmt.Errorf("%w: %d answers to %d hand-offs", ctlwire.ErrUnavailable, len(resp.Errors), n)
		}
		refreshed := false
		for i, ae := range resp.Errors {
			err := ae.AsError()
			if info.ambiguous && errors.Is(err, metadata.ErrMoveRefused) {
				// An earlier attempt may have been applied: judge by a consistent View.
				if !refreshed {
					refreshed = c.refreshConsistent(ctx) == nil
				}
				if refreshed && c.handedOff(done[i].Topic, done[i].Partition, done[i].EndOffset) {
					err = nil
				}
			}
			errs = append(errs, err)
		}
		c.waitVersion(ctx, resp.Version)
		done = done[n:]
	}
	return errs, nil
}

// CompleteRecovery implements metadata.Recoverer: this broker, leading the partition in
// leaderEpoch since it took it over from a fenced broker, recovered the fenced broker's
// log range up to endOffset. The same completion again succeeds (the controller recognises
// it), so a retry of one that was applied although its answer was lost succeeds, in
// this call or a later one. On return the local View shows the completion.
func (c *Client) CompleteRecovery(ctx context.Context, id metadata.TopicID, partition int32, leaderEpoch int32, endOffset int64) error {
	req := ctlwire.CompleteRecoveryRequest{TopicID: id, Partition: partition, Leader: c.selfID.Load(), BrokerEpoch: c.epoch.Load(), LeaderEpoch: leaderEpoch, EndOffset: endOffset}
	var resp ctlwire.VersionResponse
	if _, err := c.call(ctx, http.MethodPost, ctlwire.PathCompleteRecovery, req, &resp); err != nil {
		return err
	}
	c.waitVersion(ctx, resp.Version)
	return nil
}

// CompleteRecoveries implements metadata.BatchRecoverer: at most 4096 items per call
// (more are sent in several requests).
func (c *Client) CompleteRecoveries(ctx context.Context, done []metadata.Recovered) ([]error, error) {
	errs := make([]error, 0, len(done))
	for len(done) > 0 {
		n := min(len(done), ctlwire.MaxRecoveriesPerRequest)
		req := ctlwire.CompleteRecoveriesRequest{Leader: c.selfID.Load(), BrokerEpoch: c.epoch.Load(), Items: make([]ctlwire.RecoveryDoneItem, n)}
		for i, d := range done[:n] {
			req.Items[i] = ctlwire.RecoveryDoneItem{TopicID: d.Topic, Partition: d.Partition, LeaderEpoch: d.LeaderEpoch, EndOffset: d.EndOffset}
		}
		var resp ctlwire.CompleteRecoveriesResponse
		if _, err := c.call(ctx, http.MethodPost, ctlwire.PathCompleteRecoveries, req, &resp); err != nil {
			return nil, err
		}
		if len(resp.Errors) != n {
			return nil, fmt.Errorf("%w: %d answers to %d recoveries", ctlwire.ErrUnavailable, len(resp.Errors), n)
		}
		for _, ae := range resp.Errors {
			errs = append(errs, ae.AsError())
		}
		c.waitVersion(ctx, resp.Version)
		done = done[n:]
	}
	return errs, nil
}

// CancelMove implements metadata.Mover.
func (c *Client) CancelMove(ctx context.Context, id metadata.TopicID, partition int32) error {
	var resp ctlwire.VersionResponse
	if _, err := c.call(ctx, http.MethodPost, ctlwire.PathCancelMove, ctlwire.MoveRequest{TopicID: id, Partition: partition}, &resp); err != nil {
		return err
	}
	c.waitVersion(ctx, resp.Version)
	return nil
}

// Status asks one controller (by index in ClientConfig.Controllers) for its status.
func (c *Client) Status(ctx context.Context, idx int) (ctlwire.Status, error) {
	var st ctlwire.Status
	if idx < 0 || idx >= len(c.cfg.Controllers) {
		return st, fmt.Errorf("%w: controller index %d", ctlwire.ErrBadRequest, idx)
	}
	addr := c.cfg.Controllers[idx]
	status, body, err := c.attempt(ctx, addr, http.MethodGet, ctlwire.PathStatus, nil, c.cfg.RequestTimeout)
	if err != nil {
		return st, c.classifyErr(addr, err)
	}
	if status != http.StatusOK {
		return st, c.classifyAnswer(addr, status, body)
	}
	return st, json.Unmarshal(body, &st)
}
