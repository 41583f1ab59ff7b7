package controller

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/weir-io/weir/controller/ctlwire"
)

// handleMetadata serves GET /v1/metadata. With after=V it is a long poll: the answer
// comes as soon as the local state's version exceeds V, or 204 after wait (default 0:
// answer at once). Served from this controller's state machine, which may lag the
// leader by a few entries. With consistent=1 it is served by the leader after a Raft
// barrier, so it reflects every write acknowledged before it (a broker uses it once at
// start-up, before replaying its WAL). With after=V and delta=1 the answer is a delta
// from V when this controller's step history reaches back to V (delta.go), else the
// full View; clients that do not ask always get the full View.
func (c *Controller) handleMetadata(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if b, _ := strconv.ParseBool(q.Get("consistent")); b {
		local := func() { c.serveConsistent(w) }
		if c.IsLeader() {
			local()
		} else {
			c.forward(w, r, nil, local)
		}
		return
	}
	var after uint64
	hasAfter := q.Has("after")
	if hasAfter {
		var err error
		if after, err = strconv.ParseUint(q.Get("after"), 10, 64); err != nil {
			writeError(w, fmt.Errorf("%w: after=%q", ctlwire.ErrBadRequest, q.Get("after")))
			return
		}
	}
	wantDelta, _ := strconv.ParseBool(q.Get("delta"))
	var wait time.Duration
	if s := q.Get("wait"); s != "" {
		var err error
		if wait, err = time.ParseDuration(s); err != nil || wait < 0 {
			writeError(w, fmt.Errorf("%w: wait=%q", ctlwire.ErrBadRequest, s))
			return
		}
		wait = min(wait, c.cfg.MaxWatchWait)
	}
	var timeout <-chan time.Time
	for {
		changed := c.fsm.Changed() // before reading the view: no change slips between
		p := c.fsm.published()
		if !hasAfter || p.view.Version > after {
			if wantDelta && after > 0 {
				if b := c.fsm.steps.delta(after, p.view); b != nil {
					writeBody(w, p.view.Version, b)
					return
				}
			}
			writeView(w, p)
			return
		}
		if wait <= 0 {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if timeout == nil {
			t := time.NewTimer(wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-changed:
		case <-timeout:
			w.WriteHeader(http.StatusNoContent)
			return
		case <-r.Context().Done():
			return
		case <-c.ctx.Done():
			writeError(w, fmt.Errorf("%w: controller shutting down", ctlwire.ErrUnavailable))
			return
		}
	}
}

func (c *Controller) serveConsistent(w http.ResponseWriter) {
	r := c.r.Load()
	if r == nil {
		writeError(w, ctlwire.ErrUnavailable)
		return
	}
	if err := r.Barrier(c.cfg.ApplyTimeout).Error(); err != nil {
		writeError(w, fmt.Errorf("%w: barrier: %v", ctlwire.ErrUnavailable, err))
		return
	}
	if c.fsm.View().ClusterID == "" {
		if err := c.ensureClusterID(); err != nil {
			writeError(w, err)
			return
		}
	}
	writeView(w, c.fsm.published())
}

func writeView(w http.ResponseWriter, p *published) { writeBody(w, p.view.Version, p.json()) }

func writeBody(w http.ResponseWriter, version uint64, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Weir-Version", strconv.FormatUint(version, 10))
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}
