package controller

import (
	"fmt"
	"net/http"
	"time"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/routing"
)

// leaseResponse is a register or heartbeat answer: the lease this controller grants
// (Config.GrantedLease), who answered and how many controllers vote, so the broker can
// count a majority.
func (c *Controller) leaseResponse(epoch int64, version uint64) ctlwire.LeaseResponse {
	return ctlwire.LeaseResponse{Epoch: epoch, Version: version, LeaseTimeoutMs: c.cfg.GrantedLease().Milliseconds(),
		NodeID: c.cfg.NodeID, Voters: len(c.cfg.Peers)}
}

// handleRegister records a broker start: a new epoch, state active, a fresh lease; the
// broker takes over the Recovering partitions left without a leader. A registration
// that replaces a live one of another process (another incarnation) needs the votes a
// fence needs (leasevote.go): while that process may hold a lease the registration is
// refused (metadata.ErrDuplicateBroker), and the broker retries. Registrations are
// serialised on the leader, so two processes starting at once cannot both pass.
func (c *Controller) handleRegister(r *http.Request, body []byte) (any, error) {
	var req ctlwire.RegisterRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if req.ID < 0 || req.Port < 0 || req.Port > 65535 || len(req.Host) > 255 || len(req.Rack) > 255 || len(req.Incarnation) > 255 {
		return nil, fmt.Errorf("%w: broker id %d, host %.40q, port %d, rack %.40q", ctlwire.ErrBadRequest, req.ID, req.Host, req.Port, req.Rack)
	}
	if err := validListeners(req.Listeners); err != nil {
		return nil, fmt.Errorf("%w: broker id %d: %v", ctlwire.ErrBadRequest, req.ID, err)
	}
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if b, ok := c.fsm.View().Broker(req.ID); ok && b.Active() {
		inc, _ := c.leases.holder(req.ID, b.Epoch, time.Now(), 0)
		// The same process registering again left its registration itself (its storage
		// failed, or it was told it is fenced): no vote needed. Anyone else must wait
		// until that registration's lease cannot be valid any more.
		if inc == "" || inc != req.Incarnation {
			if ok, votes := c.fenceVotes(r.Context(), req.ID, b.Epoch); !ok {
				c.metrics.duplicates.Inc()
				return nil, fmt.Errorf("%w: broker id %d is in use by a live process (epoch %d, incarnation %q): a majority of the controllers "+
					"heard from it within %v (votes %v); if that process is gone, its lease runs out within %v",
					metadata.ErrDuplicateBroker, req.ID, b.Epoch, inc, c.cfg.SuspectTimeout, votes, c.cfg.SuspectTimeout)
			}
		}
	}
	res, err := c.propose(&registerBrokerCmd{ID: req.ID, Host: req.Host, Port: req.Port, Rack: req.Rack, Listeners: req.Listeners})
	if err != nil {
		return nil, err
	}
	rr, _ := res.Value.(registerResult)
	// Not the registration's connection for the closed-connection hint: it is the
	// client's pool for every call (the metadata watch's long poll among them), which
	// outlives nothing; the heartbeats' own connections are noted.
	c.leases.renew(req.ID, rr.Epoch, req.Incarnation, time.Now())
	c.metrics.failedOver.Add(float64(rr.Adopted))
	c.log.Info("broker registered", "broker", req.ID, "epoch", rr.Epoch, "host", req.Host, "port", req.Port, "rack", req.Rack,
		"listeners", len(req.Listeners), "incarnation", req.Incarnation, "adopted_partitions", rr.Adopted)
	return c.leaseResponse(rr.Epoch, res.Version), nil
}

// validListeners checks a registration's extra listeners: at most
// metadata.MaxListeners, each named once (a zone listener by its zone; names are spelled
// as zones, routing.ValidZone), of a valid zone if any and a known security protocol, a
// host of 1 to 255 bytes and a port in 1..65535.
func validListeners(ls []metadata.Listener) error {
	if len(ls) > metadata.MaxListeners {
		return fmt.Errorf("%d listeners, at most %d", len(ls), metadata.MaxListeners)
	}
	seen := make(map[string]bool, len(ls))
	for _, l := range ls {
		name := l.Key()
		switch {
		case !routing.ValidZone(name):
			return fmt.Errorf("listener: invalid name %.40q", name)
		case l.Zone != "" && !routing.ValidZone(l.Zone):
			return fmt.Errorf("listener %q: invalid zone %.40q", name, l.Zone)
		case !metadata.ValidProtocol(l.Protocol):
			return fmt.Errorf("listener %q: unknown security protocol %.40q", name, l.Protocol)
		case seen[name]:
			return fmt.Errorf("listener: name %.40q given twice", name)
		case l.Host == "" || len(l.Host) > 255:
			return fmt.Errorf("listener %q: host %.40q", name, l.Host)
		case l.Port < 1 || l.Port > 65535:
			return fmt.Errorf("listener %q: port %d", name, l.Port)
		}
		seen[name] = true
	}
	return nil
}

// handleHeartbeat acknowledges a heartbeat of a broker registration on this
// controller, leader or not (leases.go: the broker counts a majority): refused with
// metadata.ErrFenced when this controller's View shows the registration over, or it
// voted to fence it. The leader also keeps the load report for the balancer.
func (c *Controller) handleHeartbeat(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r, c.cfg.MaxBodyBytes)
	var req ctlwire.HeartbeatRequest
	if err == nil {
		err = decode(body, &req)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	now := time.Now()
	v := c.fsm.View()
	b, ok := v.Broker(req.ID)
	switch {
	case ok && req.Epoch > b.Epoch, !ok && req.Epoch > 0:
		// A registration this controller has not applied yet: its heartbeats count
		// here like any (a vote must see them); the View catches up.
	case !ok || b.Epoch != req.Epoch || !b.Active():
		writeError(w, fmt.Errorf("%w: broker %d epoch %d: registration over (fenced or replaced)", metadata.ErrFenced, req.ID, req.Epoch))
		return
	}
	if !c.leases.renew(req.ID, req.Epoch, req.Incarnation, now) {
		writeError(w, fmt.Errorf("%w: broker %d epoch %d: controller %d voted to fence this registration", metadata.ErrFenced, req.ID, req.Epoch, c.cfg.NodeID))
		return
	}
	c.noteHeartbeatConn(r, req.ID)
	if req.LoadReport && c.IsLeader() {
		c.loads.report(v, req.ID, req.Load, now)
	}
	writeJSON(w, http.StatusOK, c.leaseResponse(req.Epoch, v.Version))
}

// handleDrain drains a broker's live registration (drainBrokerCmd): it turns draining
// and its partitions begin moving to other brokers; what is left behind (recovering
// partitions) the balancer moves later. Refused with metadata.ErrFenced for a stale or
// fenced registration. Draining again re-plans what is left.
func (c *Controller) handleDrain(r *http.Request, body []byte) (any, error) {
	var req ctlwire.DrainRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	res, err := c.propose(&drainBrokerCmd{ID: req.ID, Epoch: req.Epoch})
	if err != nil {
		return nil, err
	}
	dr, _ := res.Value.(drainResult)
	if dr.Started {
		c.metrics.drains.Inc()
	}
	c.log.Info("broker draining", "broker", req.ID, "epoch", req.Epoch, "started", dr.Started, "moves", dr.Moves,
		"already_moving", dr.AlreadyMoving, "recovering", dr.Recovering, "no_target", dr.NoTarget, "moves_cancelled", dr.MovesCancelled)
	return ctlwire.DrainResponse{Version: res.Version, Started: dr.Started, Moves: dr.Moves, AlreadyMoving: dr.AlreadyMoving,
		Recovering: dr.Recovering, NoTarget: dr.NoTarget, MovesCancelled: dr.MovesCancelled}, nil
}

// handleUndrain takes a draining registration out of draining (undrainBrokerCmd).
func (c *Controller) handleUndrain(r *http.Request, body []byte) (any, error) {
	var req ctlwire.DrainRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	res, err := c.propose(&undrainBrokerCmd{ID: req.ID, Epoch: req.Epoch})
	if err != nil {
		return nil, err
	}
	c.log.Info("broker undrained", "broker", req.ID, "epoch", req.Epoch)
	return ctlwire.VersionResponse{Version: res.Version}, nil
}

// handleDecommission retires a fenced broker that leads nothing (decommissionBrokerCmd).
func (c *Controller) handleDecommission(r *http.Request, body []byte) (any, error) {
	var req ctlwire.DecommissionRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	res, err := c.propose(&decommissionBrokerCmd{ID: req.ID})
	if err != nil {
		return nil, err
	}
	c.log.Info("broker decommissioned", "broker", req.ID)
	return ctlwire.VersionResponse{Version: res.Version}, nil
}

// handleSuspect records that a broker's gossip suspects another: the suspect is fenced
// once it has been silent for SuspectTimeout instead of the whole lease.
func (c *Controller) handleSuspect(r *http.Request, body []byte) (any, error) {
	var req ctlwire.SuspectRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	c.leases.suspect(req.ID, time.Now())
	c.log.Info("broker reported suspect", "broker", req.ID, "reporter", req.Reporter)
	return ctlwire.VersionResponse{Version: c.fsm.View().Version}, nil
}
