package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/weir-io/weir/metadata"
)

// CreateTopic implements metadata.Store. The client picks the topic's UUID, so a retry
// of a create that was applied although its answer was lost succeeds with that topic.
func (c *Client) CreateTopic(ctx context.Context, spec metadata.TopicSpec, validateOnly bool) (*metadata.Topic, error) {
	n := spec.Partitions
	if n == -1 && c.cfg.DefaultPartitions > 0 {
		n = c.cfg.DefaultPartitions
	}
	req := CreateTopicRequest{
		Name:              spec.Name,
		Partitions:        n,
		ReplicationFactor: spec.ReplicationFactor,
		Configs:           spec.Configs,
		ValidateOnly:      validateOnly,
		ID:                newTopicID(),
	}
	var resp TopicResponse
	if _, err := c.call(ctx, http.MethodPost, "/v1/topics", req, &resp); err != nil {
		return nil, err
	}
	if resp.Topic == nil {
		return nil, fmt.Errorf("%w: create answered without a topic", ErrUnavailable)
	}
	if !validateOnly {
		c.waitVersion(ctx, resp.Version)
	}
	return resp.Topic, nil
}

// DeleteTopic implements metadata.Store.
func (c *Client) DeleteTopic(ctx context.Context, name string) (*metadata.Topic, error) {
	before := c.View().Topics[name]
	var resp TopicResponse
	info, err := c.call(ctx, http.MethodDelete, "/v1/topics/"+url.PathEscape(name), nil, &resp)
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
	var resp VersionResponse
	info, err := c.call(ctx, http.MethodPost, "/v1/topics/"+url.PathEscape(name)+"/partitions", CreatePartitionsRequest{Total: total, ValidateOnly: validateOnly}, &resp)
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
	req := AlterConfigsRequest{ValidateOnly: validateOnly, Ops: make([]ConfigOpJSON, len(ops))}
	for i, op := range ops {
		req.Ops[i] = ConfigOpJSON{Key: op.Key, Op: int8(op.Op), Value: op.Value}
	}
	var resp VersionResponse
	if _, err := c.call(ctx, http.MethodPost, "/v1/topics/"+url.PathEscape(name)+"/configs", req, &resp); err != nil {
		return err
	}
	if !validateOnly {
		c.waitVersion(ctx, resp.Version)
	}
	return nil
}

// SetLogStartOffset implements metadata.Store (the offset only moves forward).
func (c *Client) SetLogStartOffset(ctx context.Context, id metadata.TopicID, partition int32, offset int64) error {
	var resp VersionResponse
	if _, err := c.call(ctx, http.MethodPost, "/v1/partitions/log-start", LogStartRequest{TopicID: id, Partition: partition, Offset: offset}, &resp); err != nil {
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
		var resp ProducerIDsResponse
		if _, err := c.call(ctx, http.MethodPost, "/v1/producer-ids", ProducerIDsRequest{Count: c.cfg.ProducerIDBlock}, &resp); err != nil {
			return 0, err
		}
		if resp.Count <= 0 {
			return 0, fmt.Errorf("%w: empty producer id block", ErrUnavailable)
		}
		c.pidNext, c.pidEnd = resp.First, resp.First+resp.Count
	}
	id := c.pidNext
	c.pidNext++
	return id, nil
}

// RegisterBroker implements metadata.Registrar: it registers b (a new epoch, state
// active) and starts heartbeating every HeartbeatInterval. When a heartbeat is answered
// "fenced", the client registers again by itself (a new epoch) and logs it.
func (c *Client) RegisterBroker(ctx context.Context, b metadata.Broker) error {
	if b.ID < 0 {
		return fmt.Errorf("%w: broker id %d", ErrBadRequest, b.ID)
	}
	c.regMu.Lock()
	defer c.regMu.Unlock()
	c.self = metadata.Broker{ID: b.ID, Host: b.Host, Port: b.Port, Rack: b.Rack}
	c.selfID.Store(b.ID)
	if err := c.register(ctx); err != nil {
		return err
	}
	c.hbOnce.Do(func() {
		c.wg.Add(1)
		go c.heartbeatLoop()
	})
	return nil
}

// register sends the registration; callers hold regMu.
func (c *Client) register(ctx context.Context) error {
	send := time.Now()
	var resp LeaseResponse
	req := RegisterRequest{ID: c.self.ID, Host: c.self.Host, Port: c.self.Port, Rack: c.self.Rack}
	if _, err := c.call(ctx, http.MethodPost, "/v1/brokers/register", req, &resp); err != nil {
		return err
	}
	old := c.epoch.Swap(resp.Epoch)
	c.leaseMu.Lock()
	c.lastAck = send // the leader granted a fresh lease when it applied the registration
	c.leaseDur = time.Duration(resp.LeaseTimeoutMs) * time.Millisecond
	c.leaseMu.Unlock()
	c.log.Info("registered with the controllers", "broker", c.self.ID, "epoch", resp.Epoch, "previous_epoch", old)
	c.waitVersion(ctx, resp.Version)
	if old != 0 && c.cfg.OnEpochChange != nil {
		c.cfg.OnEpochChange(old, resp.Epoch)
	}
	return nil
}

func (c *Client) heartbeatLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		if c.hbPaused.Load() {
			continue
		}
		c.heartbeat()
	}
}

func (c *Client) heartbeat() {
	epoch := c.epoch.Load()
	send := time.Now()
	c.leaseMu.Lock()
	budget := c.leaseDur
	c.leaseMu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, max(budget, c.cfg.HeartbeatInterval))
	defer cancel()
	var resp LeaseResponse
	_, err := c.call(ctx, http.MethodPost, "/v1/brokers/heartbeat", HeartbeatRequest{ID: c.selfID.Load(), Epoch: epoch}, &resp)
	switch {
	case err == nil:
		if resp.Epoch != c.epoch.Load() {
			return
		}
		c.leaseMu.Lock()
		if send.After(c.lastAck) {
			c.lastAck = send
		}
		if resp.LeaseTimeoutMs > 0 {
			c.leaseDur = time.Duration(resp.LeaseTimeoutMs) * time.Millisecond
		}
		c.leaseMu.Unlock()
	case errors.Is(err, metadata.ErrFenced):
		c.leaseMu.Lock()
		c.lastAck = time.Time{} // stop acking now
		c.leaseMu.Unlock()
		c.log.Warn("the controller fenced this broker; registering again", "broker", c.selfID.Load(), "epoch", epoch)
		c.regMu.Lock()
		defer c.regMu.Unlock()
		if c.epoch.Load() != epoch {
			return // someone registered meanwhile
		}
		if err := c.register(c.ctx); err != nil && c.ctx.Err() == nil {
			c.log.Error("registering again failed; will retry at the next heartbeat", "err", err)
		}
	default:
		if c.ctx.Err() == nil {
			c.log.Warn("heartbeat failed", "broker", c.selfID.Load(), "epoch", epoch, "err", err)
		}
	}
}

// Epoch implements metadata.Leaser: the current registration epoch (0 before).
func (c *Client) Epoch() int64 { return c.epoch.Load() }

// LeaseValid implements metadata.Leaser: true until LeaseTimeout after the send time of
// the last acknowledged heartbeat, measured on this process's (monotonic) clock. The
// controller fences later than that (it counts from receipt, plus a grace), so a broker
// that checks LeaseValid before acking stops acking before it can be fenced.
func (c *Client) LeaseValid(now time.Time) bool {
	c.leaseMu.Lock()
	defer c.leaseMu.Unlock()
	return !c.lastAck.IsZero() && now.Before(c.lastAck.Add(c.leaseDur))
}

// ReportSuspect implements metadata.Leaser.
func (c *Client) ReportSuspect(ctx context.Context, id int32) error {
	_, err := c.call(ctx, http.MethodPost, "/v1/brokers/suspect", SuspectRequest{ID: id, Reporter: c.selfID.Load()}, nil)
	return err
}

// MovePartition implements metadata.Mover.
func (c *Client) MovePartition(ctx context.Context, id metadata.TopicID, partition int32, target int32) error {
	var resp VersionResponse
	if _, err := c.call(ctx, http.MethodPost, "/v1/partitions/move", MoveRequest{TopicID: id, Partition: partition, Target: target}, &resp); err != nil {
		return err
	}
	c.waitVersion(ctx, resp.Version)
	return nil
}

// CompleteMove implements metadata.Mover: this broker (the current leader, in its
// current epoch) hands the partition to the move's target from endOffset on.
func (c *Client) CompleteMove(ctx context.Context, id metadata.TopicID, partition int32, endOffset int64) error {
	self := c.selfID.Load()
	req := CompleteMoveRequest{TopicID: id, Partition: partition, From: self, FromEpoch: c.epoch.Load(), EndOffset: endOffset}
	var resp VersionResponse
	info, err := c.call(ctx, http.MethodPost, "/v1/partitions/complete-move", req, &resp)
	if err != nil {
		if info.ambiguous && errors.Is(err, metadata.ErrMoveRefused) && c.refreshConsistent(ctx) == nil {
			if t := c.View().TopicByID(id); t != nil && int(partition) < len(t.Partitions) {
				p := t.Partitions[partition]
				if n := len(p.Logs); p.Leader != self && n >= 2 && p.Logs[n-1].Broker == p.Leader &&
					p.Logs[n-1].StartOffset == endOffset && p.Logs[n-2].Broker == self {
					return nil // an earlier attempt completed it
				}
			}
		}
		return err
	}
	c.waitVersion(ctx, resp.Version)
	return nil
}

// CancelMove implements metadata.Mover.
func (c *Client) CancelMove(ctx context.Context, id metadata.TopicID, partition int32) error {
	var resp VersionResponse
	if _, err := c.call(ctx, http.MethodPost, "/v1/partitions/cancel-move", MoveRequest{TopicID: id, Partition: partition}, &resp); err != nil {
		return err
	}
	c.waitVersion(ctx, resp.Version)
	return nil
}

// Status asks one controller (by index in ClientConfig.Controllers) for its status.
func (c *Client) Status(ctx context.Context, idx int) (Status, error) {
	var st Status
	if idx < 0 || idx >= len(c.cfg.Controllers) {
		return st, fmt.Errorf("%w: controller index %d", ErrBadRequest, idx)
	}
	status, body, err := c.attempt(ctx, c.cfg.Controllers[idx], http.MethodGet, "/v1/status", nil, c.cfg.RequestTimeout)
	if err != nil {
		return st, err
	}
	if status != http.StatusOK {
		return st, fmt.Errorf("%w: HTTP %d", ErrUnavailable, status)
	}
	return st, json.Unmarshal(body, &st)
}
