package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/weir-io/weir/controller/ctlwire"
)

// The controller API (the route table and the bodies: package ctlwire): HTTP/1.1 + JSON
// on its own listener; keep-alive connections are the brokers' persistent connections.
// Any controller accepts any request: reads of the metadata are served from the local
// state machine, everything else is handled by the Raft leader, a follower proxying it
// there (waiting for an election to finish if need be). Errors answer with
// ctlwire.NewAPIError.

// forwardedHeader marks a request a follower proxied; it is never proxied again.
const forwardedHeader = "X-Weir-Forwarded-By"

func (c *Controller) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+ctlwire.PathRegister, writeAs[ctlwire.RegisterRequest](c, c.handleRegister))
	// Leases are every controller's (leases.go): heartbeats and fence votes are
	// answered where they arrive, never forwarded.
	mux.HandleFunc("POST "+ctlwire.PathHeartbeat, c.handleHeartbeat)
	mux.HandleFunc("POST "+ctlwire.PathLeaseVote, c.handleLeaseVote)
	mux.HandleFunc("POST "+ctlwire.PathSuspect, writeAs[ctlwire.SuspectRequest](c, c.handleSuspect))
	mux.HandleFunc("POST "+ctlwire.PathDrain, writeAs[ctlwire.DrainRequest](c, c.handleDrain))
	mux.HandleFunc("POST "+ctlwire.PathUndrain, writeAs[ctlwire.DrainRequest](c, c.handleUndrain))
	mux.HandleFunc("POST "+ctlwire.PathDecommission, writeAs[ctlwire.DecommissionRequest](c, c.handleDecommission))
	mux.HandleFunc("POST "+ctlwire.PathTopics, writeAs[ctlwire.CreateTopicRequest](c, c.handleCreateTopic))
	mux.HandleFunc("DELETE "+ctlwire.PathTopic, c.write(c.handleDeleteTopic, nil))
	mux.HandleFunc("POST "+ctlwire.PathTopicPartitions, writeAs[ctlwire.CreatePartitionsRequest](c, c.handleCreatePartitions))
	mux.HandleFunc("POST "+ctlwire.PathTopicConfigs, writeAs[ctlwire.AlterConfigsRequest](c, c.handleAlterConfigs))
	mux.HandleFunc("POST "+ctlwire.PathLogStart, writeAs[ctlwire.LogStartRequest](c, c.handleLogStart))
	mux.HandleFunc("POST "+ctlwire.PathMove, writeAs[ctlwire.MoveRequest](c, c.handleMove))
	mux.HandleFunc("POST "+ctlwire.PathCompleteMove, writeAs[ctlwire.CompleteMoveRequest](c, c.handleCompleteMove))
	mux.HandleFunc("POST "+ctlwire.PathCancelMove, writeAs[ctlwire.MoveRequest](c, c.handleCancelMove))
	mux.HandleFunc("POST "+ctlwire.PathCompleteRecovery, writeAs[ctlwire.CompleteRecoveryRequest](c, c.handleCompleteRecovery))
	mux.HandleFunc("POST "+ctlwire.PathCompleteRecoveries, writeAs[ctlwire.CompleteRecoveriesRequest](c, c.handleCompleteRecoveries))
	mux.HandleFunc("POST "+ctlwire.PathCompleteMoves, writeAs[ctlwire.CompleteMovesRequest](c, c.handleCompleteMoves))
	mux.HandleFunc("POST "+ctlwire.PathProducerIDs, writeAs[ctlwire.ProducerIDsRequest](c, c.handleProducerIDs))
	mux.HandleFunc("POST "+ctlwire.PathPrepareObject, writeAs[ctlwire.PrepareObjectRequest](c, c.handlePrepareObject))
	mux.HandleFunc("POST "+ctlwire.PathCommitObject, writeAs[ctlwire.CommitObjectRequest](c, c.handleCommitObject))
	mux.HandleFunc("POST "+ctlwire.PathReplaceRanges, writeAs[ctlwire.ReplaceRangesRequest](c, c.handleReplaceRanges))
	mux.HandleFunc("POST "+ctlwire.PathDeleteObjects, writeAs[ctlwire.DeleteObjectsRequest](c, c.handleDeleteObjects))
	mux.HandleFunc("POST "+ctlwire.PathScram, writeAs[ctlwire.ScramRequest](c, c.handleAlterScram))
	c.aclRoutes(mux)
	mux.HandleFunc("GET "+ctlwire.PathMetadata, c.handleMetadata)
	mux.HandleFunc("GET "+ctlwire.PathStatus, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, c.Status()) })
	// The balancer's state lives on the leader: a follower forwards, like a write.
	mux.HandleFunc("GET "+ctlwire.PathBalancer, c.write(func(*http.Request, []byte) (any, error) { return c.bal.status(), nil }, nil))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, fmt.Errorf("%w: %s %s", ctlwire.ErrNotFound, r.Method, r.URL.Path))
	})
	return c.instrument(c.authenticate(mux))
}

// statusRecorder remembers the answer's status for the metrics.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// instrument counts requests by route and status and turns a handler panic into a 500
// (bad input must never take a controller down).
func (c *Controller) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				c.log.Error("controller API handler panicked", "path", r.URL.Path, "panic", p)
				if rec.status == 0 {
					writeError(rec, fmt.Errorf("%w: %v", ctlwire.ErrInternal, p))
				}
			}
			path := r.Pattern
			if path == "" || path == "/" {
				path = "other"
			}
			c.metrics.apiRequests.WithLabelValues(path, strconv.Itoa(rec.status)).Inc()
		}()
		next.ServeHTTP(rec, r)
	})
}

// writeHandler handles a request on the leader; its value is sent as JSON.
type writeHandler func(r *http.Request, body []byte) (any, error)

// writeAs is write for a body of type T: a body that does not decode as T is refused
// here rather than forwarded, so malformed input gets the same 400 from every
// controller, with or without a leader.
func writeAs[T any](c *Controller, h writeHandler) http.HandlerFunc {
	return c.write(h, func(body []byte) error { return decode(body, new(T)) })
}

// write wraps a leader-only handler: bounded body, optional shape check, then local
// handling on the leader, proxying on a follower.
func (c *Controller) write(h writeHandler, check func([]byte) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := readBody(w, r, c.cfg.MaxBodyBytes)
		if err == nil && check != nil {
			err = check(body)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		local := func() {
			v, err := h(r, body)
			if err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, v)
		}
		if c.IsLeader() {
			local()
			return
		}
		c.forward(w, r, body, local)
	}
}

// forward proxies a request to the leader. While no leader is known, or the known one
// cannot be dialled (it just died), it waits up to LeaderWaitTimeout for an election,
// so a change of leader costs the client a slow answer rather than an error. If this
// controller becomes the leader meanwhile it calls local.
func (c *Controller) forward(w http.ResponseWriter, r *http.Request, body []byte, local func()) {
	if r.Header.Get(forwardedHeader) != "" {
		writeError(w, fmt.Errorf("%w: request forwarded by %s, but controller %d is not the leader", ctlwire.ErrNotLeader, r.Header.Get(forwardedHeader), c.cfg.NodeID))
		return
	}
	deadline := time.Now().Add(c.cfg.LeaderWaitTimeout)
	failed := ""
	for {
		if c.IsLeader() {
			local()
			return
		}
		if _, api, ok := c.leader(); ok && api != failed {
			resp, err := c.forwardOnce(r, api, body)
			if err == nil {
				defer resp.Body.Close()
				if ct := resp.Header.Get("Content-Type"); ct != "" {
					w.Header().Set("Content-Type", ct)
				}
				w.WriteHeader(resp.StatusCode)
				io.Copy(w, resp.Body)
				return
			}
			if !ctlwire.IsDialError(err) {
				// The leader may have acted on it: the client must decide (retry is safe).
				writeError(w, fmt.Errorf("%w: forwarding to the leader at %s: %v", ctlwire.ErrUnavailable, api, err))
				return
			}
			failed = api
		}
		if time.Now().After(deadline) {
			writeError(w, fmt.Errorf("%w: controller %d knows no reachable leader", ctlwire.ErrNotLeader, c.cfg.NodeID))
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-c.ctx.Done():
			writeError(w, fmt.Errorf("%w: controller shutting down", ctlwire.ErrUnavailable))
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *Controller) forwardOnce(r *http.Request, api string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, c.auth.scheme+"://"+api+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(forwardedHeader, strconv.Itoa(int(c.cfg.NodeID)))
	c.auth.forwardCredentials(r, req)
	// Every write is safe to replay (see the client): let the transport retry a request
	// that died on a stale keep-alive connection.
	req.Header.Set("Idempotency-Key", "weir")
	c.metrics.forwarded.Inc()
	return c.fwd.Do(req)
}

// readBody reads the whole body, at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, fmt.Errorf("%w: body larger than %d bytes", ctlwire.ErrBadRequest, limit)
		}
		return nil, fmt.Errorf("%w: reading body: %v", ctlwire.ErrBadRequest, err)
	}
	return b, nil
}

// decode parses a JSON body into v; anything malformed is a bad request.
func decode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return fmt.Errorf("%w: empty body", ctlwire.ErrBadRequest)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %v", ctlwire.ErrBadRequest, err)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(ctlwire.APIError{Code: ctlwire.CodeInternal, Message: err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, err error) {
	ae, status := ctlwire.NewAPIError(err)
	writeJSON(w, status, ae)
}
