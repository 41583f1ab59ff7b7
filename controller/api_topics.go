package controller

import (
	"fmt"
	"net/http"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// Topic administration runs under adminMu on the leader: it validates against the
// View, plans (UUID, placement) and proposes, and the next one starts from the result.

func (c *Controller) handleCreateTopic(r *http.Request, body []byte) (any, error) {
	var req ctlwire.CreateTopicRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := metadata.ValidTopicName(req.Name); err != nil {
		return nil, err
	}
	n := req.Partitions
	if n == -1 {
		n = c.cfg.DefaultPartitions
	}
	if n <= 0 || n > c.cfg.MaxPartitions {
		return nil, fmt.Errorf("%w: %d (must be 1..%d)", metadata.ErrInvalidPartitions, n, c.cfg.MaxPartitions)
	}
	if req.ReplicationFactor == 0 || req.ReplicationFactor < -1 {
		return nil, fmt.Errorf("%w: %d", metadata.ErrInvalidReplication, req.ReplicationFactor)
	}
	configs := make(map[string]string, len(req.Configs))
	for k, v := range req.Configs {
		if err := metadata.ValidateTopicConfig(k, v); err != nil {
			return nil, err
		}
		configs[k] = v
	}
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	v := c.fsm.View()
	if old := v.Topics[req.Name]; old != nil {
		if !req.ID.IsZero() && old.ID == req.ID {
			return ctlwire.TopicResponse{Topic: old, Version: v.Version}, nil // a retry of a create that worked
		}
		return nil, fmt.Errorf("%w: %q", metadata.ErrTopicExists, req.Name)
	}
	id := req.ID
	if id.IsZero() {
		id = metadata.NewTopicID()
	} else if v.TopicByID(id) != nil {
		return nil, fmt.Errorf("%w: topic id %s in use", metadata.ErrTopicExists, id)
	}
	parts, ok := place(v, nil, 0, n)
	if !ok {
		return nil, fmt.Errorf("%w: no active (not draining) broker to lead the partitions", metadata.ErrNotController)
	}
	t := metadata.Topic{Name: req.Name, ID: id, Partitions: parts, Configs: configs}
	if req.ValidateOnly {
		return ctlwire.TopicResponse{Topic: &t, Version: v.Version}, nil
	}
	res, err := c.propose(&createTopicCmd{Topic: t})
	if err != nil {
		return nil, err
	}
	created, _ := res.Value.(*metadata.Topic)
	return ctlwire.TopicResponse{Topic: created, Version: res.Version}, nil
}

func (c *Controller) handleDeleteTopic(r *http.Request, _ []byte) (any, error) {
	name := r.PathValue("name")
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	t := c.fsm.View().Topics[name]
	if t == nil {
		return nil, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, name)
	}
	res, err := c.propose(&deleteTopicCmd{Name: name, ID: t.ID})
	if err != nil {
		return nil, err
	}
	return ctlwire.TopicResponse{Topic: t, Version: res.Version}, nil
}

func (c *Controller) handleCreatePartitions(r *http.Request, body []byte) (any, error) {
	name := r.PathValue("name")
	var req ctlwire.CreatePartitionsRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	v := c.fsm.View()
	t := v.Topics[name]
	if t == nil {
		return nil, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, name)
	}
	have := int32(len(t.Partitions))
	if req.Total <= have {
		return nil, fmt.Errorf("%w: topic %q has %d partitions, asked for %d (can only grow)", metadata.ErrInvalidPartitions, name, have, req.Total)
	}
	if req.Total > c.cfg.MaxPartitions {
		return nil, fmt.Errorf("%w: %d exceeds the limit %d", metadata.ErrInvalidPartitions, req.Total, c.cfg.MaxPartitions)
	}
	parts, ok := place(v, t, have, req.Total-have)
	if !ok {
		return nil, fmt.Errorf("%w: no active (not draining) broker to lead the partitions", metadata.ErrNotController)
	}
	if req.ValidateOnly {
		return ctlwire.VersionResponse{Version: v.Version}, nil
	}
	res, err := c.propose(&createPartitionsCmd{Name: name, ID: t.ID, Partitions: parts})
	if err != nil {
		return nil, err
	}
	return ctlwire.VersionResponse{Version: res.Version}, nil
}

func (c *Controller) handleAlterConfigs(r *http.Request, body []byte) (any, error) {
	name := r.PathValue("name")
	var req ctlwire.AlterConfigsRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	ops := make([]metadata.ConfigOp, len(req.Ops))
	for i, op := range req.Ops {
		if op.Op < int8(metadata.OpSet) || op.Op > int8(metadata.OpSubtract) {
			return nil, fmt.Errorf("%w: unknown op %d for %q", metadata.ErrInvalidConfig, op.Op, op.Key)
		}
		ops[i] = metadata.ConfigOp{Key: op.Key, Op: metadata.ConfigOpType(op.Op), Value: op.Value}
	}
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	v := c.fsm.View()
	t := v.Topics[name]
	if t == nil {
		return nil, fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, name)
	}
	next, err := metadata.ApplyConfigOps(t.Configs, ops)
	if err != nil {
		return nil, err
	}
	if req.ValidateOnly {
		return ctlwire.VersionResponse{Version: v.Version}, nil
	}
	res, err := c.propose(&alterTopicConfigsCmd{Name: name, ID: t.ID, Configs: next})
	if err != nil {
		return nil, err
	}
	return ctlwire.VersionResponse{Version: res.Version}, nil
}
