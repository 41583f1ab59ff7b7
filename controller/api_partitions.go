package controller

import (
	"fmt"
	"net/http"

	"github.com/weir-io/weir/controller/ctlwire"
)

// Partition and producer-ID writes: the commands validate against the state when
// applied, so these need no admin lock.

func (c *Controller) proposeVersion(cmd command) (any, error) {
	res, err := c.propose(cmd)
	if err != nil {
		return nil, err
	}
	return ctlwire.VersionResponse{Version: res.Version}, nil
}

func (c *Controller) handleLogStart(r *http.Request, body []byte) (any, error) {
	var req ctlwire.LogStartRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	return c.proposeVersion(&setLogStartOffsetCmd{TopicID: req.TopicID, Partition: req.Partition, Offset: req.Offset})
}

func (c *Controller) handleMove(r *http.Request, body []byte) (any, error) {
	var req ctlwire.MoveRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	return c.proposeVersion(&beginMoveCmd{TopicID: req.TopicID, Partition: req.Partition, Target: req.Target, Gen: true})
}

func (c *Controller) handleCompleteMove(r *http.Request, body []byte) (any, error) {
	var req ctlwire.CompleteMoveRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	return c.proposeVersion(&completeMoveCmd{TopicID: req.TopicID, Partition: req.Partition, From: req.From, FromEpoch: req.FromEpoch, EndOffset: req.EndOffset, MoveGen: req.MoveGen})
}

func (c *Controller) handleCompleteRecovery(r *http.Request, body []byte) (any, error) {
	var req ctlwire.CompleteRecoveryRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	res, err := c.propose(&completeRecoveryCmd{TopicID: req.TopicID, Partition: req.Partition, Leader: req.Leader,
		BrokerEpoch: req.BrokerEpoch, LeaderEpoch: req.LeaderEpoch, EndOffset: req.EndOffset})
	if err != nil {
		return nil, err
	}
	if done, _ := res.Value.(bool); !done {
		return ctlwire.VersionResponse{Version: res.Version}, nil // a retry
	}
	c.metrics.recovered.Inc()
	c.log.Info("partition recovered", "topic_id", req.TopicID.String(), "partition", req.Partition, "leader", req.Leader,
		"leader_epoch", req.LeaderEpoch, "end_offset", req.EndOffset)
	return ctlwire.VersionResponse{Version: res.Version}, nil
}

// handleCompleteMoves completes many hand-offs of one leader in one Raft entry.
func (c *Controller) handleCompleteMoves(r *http.Request, body []byte) (any, error) {
	var req ctlwire.CompleteMovesRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if len(req.Items) == 0 || len(req.Items) > ctlwire.MaxMovesPerRequest {
		return nil, fmt.Errorf("%w: %d moves in one request (1 to %d)", ctlwire.ErrBadRequest, len(req.Items), ctlwire.MaxMovesPerRequest)
	}
	res, err := c.propose(&completeMovesCmd{From: req.From, FromEpoch: req.FromEpoch, Items: req.Items})
	if err != nil {
		return nil, err
	}
	errs, _ := res.Value.([]error)
	return ctlwire.CompleteMovesResponse{Version: res.Version, Errors: ctlwire.APIErrors(errs, len(req.Items))}, nil
}

// handleCompleteRecoveries completes many recoveries of one leader in one Raft entry.
func (c *Controller) handleCompleteRecoveries(r *http.Request, body []byte) (any, error) {
	var req ctlwire.CompleteRecoveriesRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if len(req.Items) == 0 || len(req.Items) > ctlwire.MaxRecoveriesPerRequest {
		return nil, fmt.Errorf("%w: %d recoveries in one request (1 to %d)", ctlwire.ErrBadRequest, len(req.Items), ctlwire.MaxRecoveriesPerRequest)
	}
	res, err := c.propose(&completeRecoveriesCmd{Leader: req.Leader, BrokerEpoch: req.BrokerEpoch, Items: req.Items})
	if err != nil {
		return nil, err
	}
	rr, _ := res.Value.(recoveriesResult)
	out := ctlwire.CompleteRecoveriesResponse{Version: res.Version, Errors: ctlwire.APIErrors(rr.Errs, len(req.Items))}
	done := 0
	for _, d := range rr.Done {
		if d {
			done++
		}
	}
	c.metrics.recovered.Add(float64(done))
	c.log.Info("partitions recovered", "leader", req.Leader, "broker_epoch", req.BrokerEpoch, "completed", done, "items", len(req.Items))
	return out, nil
}

func (c *Controller) handleCancelMove(r *http.Request, body []byte) (any, error) {
	var req ctlwire.MoveRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	return c.proposeVersion(&cancelMoveCmd{TopicID: req.TopicID, Partition: req.Partition})
}

func (c *Controller) handleProducerIDs(r *http.Request, body []byte) (any, error) {
	var req ctlwire.ProducerIDsRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if req.Count == 0 {
		req.Count = ctlwire.DefaultProducerIDBlock
	}
	if req.Count < 0 || req.Count > ctlwire.MaxProducerIDBlock {
		return nil, fmt.Errorf("%w: count %d (must be 1..%d)", ctlwire.ErrBadRequest, req.Count, ctlwire.MaxProducerIDBlock)
	}
	res, err := c.propose(&allocateProducerIDsCmd{Count: req.Count})
	if err != nil {
		return nil, err
	}
	first, _ := res.Value.(int64)
	return ctlwire.ProducerIDsResponse{First: first, Count: req.Count, Version: res.Version}, nil
}
