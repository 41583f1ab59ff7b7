package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/weir-io/weir/controller/ctlwire"
)

// Votes on fences (leases.go has the argument). The leader asks every controller,
// itself first, whether it may fence a broker registration; a majority of yes lets it
// propose the fence. A controller's yes is final and on disk before it is answered.

// LeaseVoteRequest is the body of POST /v1/brokers/lease-vote (controller to
// controller): may broker ID's registration Epoch be fenced?
type LeaseVoteRequest struct {
	ID    int32 `json:"id"`
	Epoch int64 `json:"epoch"`
}

// LeaseVoteResponse answers it: Yes when the answering controller (NodeID) has not
// acknowledged a heartbeat of that registration for longer than its SuspectTimeout
// (SilentMs), and will acknowledge none from now on.
type LeaseVoteResponse struct {
	NodeID   int32 `json:"node_id"`
	Yes      bool  `json:"yes"`
	SilentMs int64 `json:"silent_ms"`
}

// leaseVoteTimeout bounds one controller's answer to a vote; a controller that does
// not answer in time counts as no (the next lease check asks again).
const leaseVoteTimeout = 500 * time.Millisecond

// voteLocal is this controller's vote: persisted (when it has a vote log) before it
// is returned, so that a yes survives a restart.
func (c *Controller) voteLocal(id int32, epoch int64) (LeaseVoteResponse, error) {
	yes, _, silent := c.leases.vote(id, epoch, time.Now(), c.cfg.SuspectTimeout)
	if yes && c.votes != nil {
		// Also for a yes given before: its write may have failed.
		if err := c.votes.record(id, epoch); err != nil {
			c.log.Error("recording a fence vote failed; voting no", "broker", id, "epoch", epoch, "err", err)
			return LeaseVoteResponse{NodeID: c.cfg.NodeID}, err
		}
	}
	return LeaseVoteResponse{NodeID: c.cfg.NodeID, Yes: yes, SilentMs: silent.Milliseconds()}, nil
}

func (c *Controller) handleLeaseVote(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r, c.cfg.MaxBodyBytes)
	var req LeaseVoteRequest
	if err == nil {
		err = decode(body, &req)
	}
	if err == nil && (req.ID < 0 || req.Epoch <= 0) {
		err = fmt.Errorf("%w: broker %d epoch %d", ctlwire.ErrBadRequest, req.ID, req.Epoch)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	resp, err := c.voteLocal(req.ID, req.Epoch)
	if err != nil {
		writeError(w, fmt.Errorf("%w: %v", ctlwire.ErrUnavailable, err))
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// fenceVotes asks this controller and then the others, concurrently, for their votes
// on fencing broker id's registration epoch, and reports whether a majority of the
// voters said yes. It returns as soon as that is decided.
func (c *Controller) fenceVotes(ctx context.Context, id int32, epoch int64) (bool, []LeaseVoteResponse) {
	need := len(c.cfg.Peers)/2 + 1
	self, err := c.voteLocal(id, epoch)
	got := []LeaseVoteResponse{self}
	if err != nil || !self.Yes {
		return false, got
	}
	yes, pending := 1, 0
	if yes >= need {
		return true, got
	}
	ctx, cancel := context.WithTimeout(ctx, leaseVoteTimeout)
	defer cancel()
	answers := make(chan LeaseVoteResponse, len(c.cfg.Peers))
	body, _ := json.Marshal(LeaseVoteRequest{ID: id, Epoch: epoch})
	for _, p := range c.cfg.Peers {
		if p.ID == c.cfg.NodeID {
			continue
		}
		pending++
		go func() {
			v, err := c.askVote(ctx, p.APIAddr, body)
			if err != nil {
				c.log.Debug("fence vote not answered", "controller", p.ID, "broker", id, "epoch", epoch, "err", err)
				v = LeaseVoteResponse{NodeID: p.ID}
			}
			answers <- v
		}()
	}
	for ; pending > 0; pending-- {
		v := <-answers
		got = append(got, v)
		if v.Yes {
			yes++
		}
		if yes >= need {
			return true, got
		}
	}
	return false, got
}

func (c *Controller) askVote(ctx context.Context, api string, body []byte) (LeaseVoteResponse, error) {
	var v LeaseVoteResponse
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.auth.scheme+"://"+api+ctlwire.PathLeaseVote, bytes.NewReader(body))
	if err != nil {
		return v, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.auth.tokens != nil {
		req.Header.Set("Authorization", "Bearer "+c.auth.tokens.Bearer())
	}
	resp, err := c.fwd.Do(req)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return v, err
	}
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, b)
	}
	return v, json.Unmarshal(b, &v)
}

// connKey carries the request's connection in its context (http.Server.ConnContext),
// so a heartbeat can tell which connection it came on.
type connKey struct{}

// noteHeartbeatConn remembers that broker id heartbeats on r's connection: when that
// connection closes (the broker's process died: its kernel closed it), the broker is
// hinted gone (connClosed) and fenced SuspectTimeout after its last heartbeat, instead
// of after LeaseTimeout+LeaseGrace or the gossip's verdict.
func (c *Controller) noteHeartbeatConn(r *http.Request, id int32) {
	if nc, ok := r.Context().Value(connKey{}).(net.Conn); ok {
		c.hbConns.Store(nc, id)
	}
}

// connState is the API server's ConnState hook.
func (c *Controller) connState(nc net.Conn, st http.ConnState) {
	if st != http.StateClosed && st != http.StateHijacked {
		return
	}
	if id, ok := c.hbConns.LoadAndDelete(nc); ok {
		c.leases.connClosed(id.(int32), time.Now())
		c.log.Debug("a broker's heartbeat connection closed", "broker", id)
	}
}
