package controller

import (
	"fmt"
	"net/http"
	"time"

	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/routing"
)

// leaseMs is the lease granted in every register and heartbeat answer.
func (c *Controller) leaseMs() int64 { return c.cfg.GrantedLease().Milliseconds() }

// handleRegister records a broker start: a new epoch, state active, a fresh lease; the
// broker takes over the Recovering partitions left without a leader. A registration
// is refused (metadata.ErrDuplicateBroker) while the ID's active registration belongs to
// another incarnation whose lease is fresh: heard from within the granted lease, so
// that process may still be acking. Registrations are serialised on the leader, so two
// processes starting at once cannot both pass the check.
func (c *Controller) handleRegister(r *http.Request, body []byte) (any, error) {
	var req RegisterRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if req.ID < 0 || req.Port < 0 || req.Port > 65535 || len(req.Host) > 255 || len(req.Rack) > 255 || len(req.Incarnation) > 255 {
		return nil, fmt.Errorf("%w: broker id %d, host %.40q, port %d, rack %.40q", ErrBadRequest, req.ID, req.Host, req.Port, req.Rack)
	}
	if err := validListeners(req.Listeners); err != nil {
		return nil, fmt.Errorf("%w: broker id %d: %v", ErrBadRequest, req.ID, err)
	}
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if b, ok := c.fsm.View().Broker(req.ID); ok && b.Active() {
		inc, fresh := c.leases.holder(req.ID, b.Epoch, time.Now(), c.cfg.GrantedLease())
		if fresh && inc != req.Incarnation {
			c.metrics.duplicates.Inc()
			return nil, fmt.Errorf("%w: broker id %d is in use by a live process (epoch %d, incarnation %q, heard from within the last %v); "+
				"if that process is gone, its lease runs out within %v", metadata.ErrDuplicateBroker, req.ID, b.Epoch, inc, c.cfg.GrantedLease(), c.cfg.GrantedLease())
		}
	}
	res, err := c.propose(&registerBrokerCmd{ID: req.ID, Host: req.Host, Port: req.Port, Rack: req.Rack, Listeners: req.Listeners})
	if err != nil {
		return nil, err
	}
	rr, _ := res.Value.(registerResult)
	c.leases.renew(req.ID, rr.Epoch, req.Incarnation, time.Now())
	c.metrics.failedOver.Add(float64(rr.Adopted))
	c.log.Info("broker registered", "broker", req.ID, "epoch", rr.Epoch, "host", req.Host, "port", req.Port, "rack", req.Rack,
		"listeners", len(req.Listeners), "incarnation", req.Incarnation, "adopted_partitions", rr.Adopted)
	return LeaseResponse{Epoch: rr.Epoch, Version: res.Version, LeaseTimeoutMs: c.leaseMs()}, nil
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

// handleHeartbeat renews a broker's lease for its current epoch; a fenced broker or a
// stale epoch is told so (metadata.ErrFenced): its registration is over.
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
		return nil, fmt.Errorf("%w: broker %d epoch %d: registration over (fenced or replaced)", metadata.ErrFenced, req.ID, req.Epoch)
	}
	c.leases.renew(req.ID, req.Epoch, req.Incarnation, now)
	if req.LoadReport {
		c.loads.report(v, req.ID, req.Load, now)
	}
	return LeaseResponse{Epoch: req.Epoch, Version: v.Version, LeaseTimeoutMs: c.leaseMs()}, nil
}

// handleDrain drains a broker's live registration (drainBrokerCmd): it turns draining
// and its partitions begin moving to other brokers; what is left behind (recovering
// partitions) the balancer moves later. Refused with metadata.ErrFenced for a stale or
// fenced registration. Draining again re-plans what is left.
func (c *Controller) handleDrain(r *http.Request, body []byte) (any, error) {
	var req DrainRequest
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
	return DrainResponse{Version: res.Version, Started: dr.Started, Moves: dr.Moves, AlreadyMoving: dr.AlreadyMoving,
		Recovering: dr.Recovering, NoTarget: dr.NoTarget, MovesCancelled: dr.MovesCancelled}, nil
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
