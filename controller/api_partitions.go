package controller

import (
	"fmt"
	"net/http"
)

// Partition and producer-ID writes: the commands validate against the state when
// applied, so these need no admin lock.

func (c *Controller) proposeVersion(cmd command) (any, error) {
	res, err := c.propose(cmd)
	if err != nil {
		return nil, err
	}
	return VersionResponse{Version: res.Version}, nil
}

func (c *Controller) handleLogStart(r *http.Request, body []byte) (any, error) {
	var req LogStartRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	return c.proposeVersion(&setLogStartOffsetCmd{TopicID: req.TopicID, Partition: req.Partition, Offset: req.Offset})
}

func (c *Controller) handleMove(r *http.Request, body []byte) (any, error) {
	var req MoveRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	return c.proposeVersion(&beginMoveCmd{TopicID: req.TopicID, Partition: req.Partition, Target: req.Target, Gen: true})
}

func (c *Controller) handleCompleteMove(r *http.Request, body []byte) (any, error) {
	var req CompleteMoveRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	return c.proposeVersion(&completeMoveCmd{TopicID: req.TopicID, Partition: req.Partition, From: req.From, FromEpoch: req.FromEpoch, EndOffset: req.EndOffset, MoveGen: req.MoveGen})
}

func (c *Controller) handleCompleteRecovery(r *http.Request, body []byte) (any, error) {
	var req CompleteRecoveryRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	res, err := c.propose(&completeRecoveryCmd{TopicID: req.TopicID, Partition: req.Partition, Leader: req.Leader,
		BrokerEpoch: req.BrokerEpoch, LeaderEpoch: req.LeaderEpoch, EndOffset: req.EndOffset})
	if err != nil {
		return nil, err
	}
	if done, _ := res.Value.(bool); !done {
		return VersionResponse{Version: res.Version}, nil // a retry
	}
	c.metrics.recovered.Inc()
	c.log.Info("partition recovered", "topic_id", req.TopicID.String(), "partition", req.Partition, "leader", req.Leader,
		"leader_epoch", req.LeaderEpoch, "end_offset", req.EndOffset)
	return VersionResponse{Version: res.Version}, nil
}

// handleCompleteMoves completes many hand-offs of one leader in one Raft entry.
func (c *Controller) handleCompleteMoves(r *http.Request, body []byte) (any, error) {
	var req CompleteMovesRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if len(req.Items) == 0 || len(req.Items) > maxMovesPerRequest {
		return nil, fmt.Errorf("%w: %d moves in one request (1 to %d)", ErrBadRequest, len(req.Items), maxMovesPerRequest)
	}
	res, err := c.propose(&completeMovesCmd{From: req.From, FromEpoch: req.FromEpoch, Items: req.Items})
	if err != nil {
		return nil, err
	}
	errs, _ := res.Value.([]error)
	return CompleteMovesResponse{Version: res.Version, Errors: apiErrors(errs, len(req.Items))}, nil
}

// apiErrors turns per-item errors into their API form (nil for nil), n of them.
func apiErrors(errs []error, n int) []*APIError {
	out := make([]*APIError, n)
	for i := 0; i < n && i < len(errs); i++ {
		if err := errs[i]; err != nil {
			code, _ := errorCode(err)
			out[i] = &APIError{Code: code, Message: err.Error(), Also: alsoCodes(err, code)}
		}
	}
	return out
}

// handleCompleteRecoveries completes many recoveries of one leader in one Raft entry.
func (c *Controller) handleCompleteRecoveries(r *http.Request, body []byte) (any, error) {
	var req CompleteRecoveriesRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if len(req.Items) == 0 || len(req.Items) > maxRecoveriesPerRequest {
		return nil, fmt.Errorf("%w: %d recoveries in one request (1 to %d)", ErrBadRequest, len(req.Items), maxRecoveriesPerRequest)
	}
	res, err := c.propose(&completeRecoveriesCmd{Leader: req.Leader, BrokerEpoch: req.BrokerEpoch, Items: req.Items})
	if err != nil {
		return nil, err
	}
	rr, _ := res.Value.(recoveriesResult)
	out := CompleteRecoveriesResponse{Version: res.Version, Errors: apiErrors(rr.Errs, len(req.Items))}
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
	var req MoveRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	return c.proposeVersion(&cancelMoveCmd{TopicID: req.TopicID, Partition: req.Partition})
}

// DefaultProducerIDBlock is the block a client fetches when it runs out of IDs.
const DefaultProducerIDBlock = 1000

func (c *Controller) handleProducerIDs(r *http.Request, body []byte) (any, error) {
	var req ProducerIDsRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if req.Count == 0 {
		req.Count = DefaultProducerIDBlock
	}
	if req.Count < 0 || req.Count > maxProducerIDBlock {
		return nil, fmt.Errorf("%w: count %d (must be 1..%d)", ErrBadRequest, req.Count, maxProducerIDBlock)
	}
	res, err := c.propose(&allocateProducerIDsCmd{Count: req.Count})
	if err != nil {
		return nil, err
	}
	first, _ := res.Value.(int64)
	return ProducerIDsResponse{First: first, Count: req.Count, Version: res.Version}, nil
}
