package controller

import (
	"fmt"
	"net/http"
	"time"

	"github.com/weir-io/weir/metadata"
)

func (c *Controller) leaseMs() int64 { return c.cfg.LeaseTimeout.Milliseconds() }

// handleRegister records a broker start: a new epoch, state active, a fresh lease.
func (c *Controller) handleRegister(r *http.Request, body []byte) (any, error) {
	var req RegisterRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if req.ID < 0 || req.Port < 0 || req.Port > 65535 || len(req.Host) > 255 || len(req.Rack) > 255 {
		return nil, fmt.Errorf("%w: broker id %d, host %.40q, port %d, rack %.40q", ErrBadRequest, req.ID, req.Host, req.Port, req.Rack)
	}
	res, err := c.propose(&registerBrokerCmd{ID: req.ID, Host: req.Host, Port: req.Port, Rack: req.Rack})
	if err != nil {
		return nil, err
	}
	epoch, _ := res.Value.(int64)
	c.leases.renew(req.ID, epoch, time.Now())
	c.log.Info("broker registered", "broker", req.ID, "epoch", epoch, "host", req.Host, "port", req.Port, "rack", req.Rack)
	return LeaseResponse{Epoch: epoch, Version: res.Version, LeaseTimeoutMs: c.leaseMs()}, nil
}

// handleHeartbeat renews a broker's lease for its current epoch; a fenced broker or a
// stale epoch is told to register again.
func (c *Controller) handleHeartbeat(r *http.Request, body []byte) (any, error) {
	var req HeartbeatRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	now := time.Now()
	v := c.fsm.View()
	b, ok := v.Broker(req.ID)
	if ok && req.Epoch > b.Epoch {
		// A registration this (new) leader has not applied yet.
		return nil, fmt.Errorf("%w: broker %d epoch %d not applied here yet", ErrUnavailable, req.ID, req.Epoch)
	}
	if !ok || b.Epoch != req.Epoch || !b.Active() {
		return nil, fmt.Errorf("%w: broker %d epoch %d: fenced: re-register", metadata.ErrFenced, req.ID, req.Epoch)
	}
	c.leases.renew(req.ID, req.Epoch, now)
	return LeaseResponse{Epoch: req.Epoch, Version: v.Version, LeaseTimeoutMs: c.leaseMs()}, nil
}

// handleSuspect records that a broker's gossip suspects another: the suspect is fenced
// once it has been silent for SuspectTimeout instead of the whole lease.
func (c *Controller) handleSuspect(r *http.Request, body []byte) (any, error) {
	var req SuspectRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	c.leases.suspect(req.ID, time.Now())
	c.log.Info("broker reported suspect", "broker", req.ID, "reporter", req.Reporter)
	return VersionResponse{Version: c.fsm.View().Version}, nil
}
