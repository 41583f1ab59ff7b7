package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// The controller API: HTTP/1.1 + JSON on its own listener; keep-alive connections are
// the brokers' persistent connections. Any controller accepts any request: reads of the
// metadata are served from the local state machine, everything else is handled by the
// Raft leader, a follower proxying it there (waiting for an election to finish if need
// be). Errors are APIError bodies whose codes map 1:1 to the metadata sentinels
// (errors.go); an error matching several sentinels (an object refused for a fenced
// epoch is object_rejected and fenced) lists the others in "also".
//
//	POST   /v1/brokers/register          RegisterRequest         -> LeaseResponse | 409 duplicate_broker
//	POST   /v1/brokers/heartbeat         HeartbeatRequest        -> LeaseResponse | 409 fenced
//	POST   /v1/brokers/lease-vote        LeaseVoteRequest        -> LeaseVoteResponse (controller to controller)
//	POST   /v1/brokers/suspect           SuspectRequest          -> VersionResponse
//	POST   /v1/brokers/drain             DrainRequest            -> DrainResponse | 409 fenced
//	POST   /v1/topics                    CreateTopicRequest      -> TopicResponse
//	DELETE /v1/topics/{name}                                     -> TopicResponse
//	POST   /v1/topics/{name}/partitions  CreatePartitionsRequest -> VersionResponse
//	POST   /v1/topics/{name}/configs     AlterConfigsRequest     -> VersionResponse
//	POST   /v1/partitions/log-start      LogStartRequest         -> VersionResponse
//	POST   /v1/partitions/move           MoveRequest             -> VersionResponse
//	POST   /v1/partitions/complete-move  CompleteMoveRequest     -> VersionResponse
//	POST   /v1/partitions/cancel-move    MoveRequest             -> VersionResponse
//	POST   /v1/partitions/complete-recovery CompleteRecoveryRequest -> VersionResponse | 409 recovery_refused, fenced
//	POST   /v1/partitions/complete-recoveries CompleteRecoveriesRequest -> CompleteRecoveriesResponse | 409 fenced
//	POST   /v1/partitions/complete-moves CompleteMovesRequest   -> CompleteMovesResponse | 409 fenced
//	POST   /v1/producer-ids              ProducerIDsRequest      -> ProducerIDsResponse
//	POST   /v1/objects/prepare           PrepareObjectRequest    -> ObjectResponse | 409 object_rejected
//	POST   /v1/objects/commit            CommitObjectRequest     -> ObjectResponse | 409 object_rejected
//	POST   /v1/objects/delete            DeleteObjectsRequest    -> DeleteObjectsResponse | 409 object_rejected
//	POST   /v1/scram                     ScramRequest            -> ScramResponse (results per user)
//	POST   /v1/acls                      CreateACLsRequest       -> VersionResponse | 400 acl_rejected
//	POST   /v1/acls/delete               DeleteACLsRequest       -> DeleteACLsResponse | 400 acl_rejected
//	GET    /v1/acls                      (local state)           -> ACLsResponse
//	GET    /v1/metadata?after=V&wait=D[&delta=1]   long poll   -> ViewJSON (a delta from V with delta=1, delta.go) | 204 (no change in D)
//	GET    /v1/metadata?consistent=1     leader, after a barrier -> ViewJSON
//	GET    /v1/status                                            -> Status
//	GET    /v1/balancer                  leader                  -> BalancerStatus

// forwardedHeader marks a request a follower proxied; it is never proxied again.
const forwardedHeader = "X-Weir-Forwarded-By"

func (c *Controller) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/brokers/register", writeAs[RegisterRequest](c, c.handleRegister))
	// Leases are every controller's (leases.go): heartbeats and fence votes are
	// answered where they arrive, never forwarded.
	mux.HandleFunc("POST /v1/brokers/heartbeat", c.handleHeartbeat)
	mux.HandleFunc("POST /v1/brokers/lease-vote", c.handleLeaseVote)
	mux.HandleFunc("POST /v1/brokers/suspect", writeAs[SuspectRequest](c, c.handleSuspect))
	mux.HandleFunc("POST /v1/brokers/drain", writeAs[DrainRequest](c, c.handleDrain))
	mux.HandleFunc("POST /v1/topics", writeAs[CreateTopicRequest](c, c.handleCreateTopic))
	mux.HandleFunc("DELETE /v1/topics/{name}", c.write(c.handleDeleteTopic, nil))
	mux.HandleFunc("POST /v1/topics/{name}/partitions", writeAs[CreatePartitionsRequest](c, c.handleCreatePartitions))
	mux.HandleFunc("POST /v1/topics/{name}/configs", writeAs[AlterConfigsRequest](c, c.handleAlterConfigs))
	mux.HandleFunc("POST /v1/partitions/log-start", writeAs[LogStartRequest](c, c.handleLogStart))
	mux.HandleFunc("POST /v1/partitions/move", writeAs[MoveRequest](c, c.handleMove))
	mux.HandleFunc("POST /v1/partitions/complete-move", writeAs[CompleteMoveRequest](c, c.handleCompleteMove))
	mux.HandleFunc("POST /v1/partitions/cancel-move", writeAs[MoveRequest](c, c.handleCancelMove))
	mux.HandleFunc("POST /v1/partitions/complete-recovery", writeAs[CompleteRecoveryRequest](c, c.handleCompleteRecovery))
	mux.HandleFunc("POST /v1/partitions/complete-recoveries", writeAs[CompleteRecoveriesRequest](c, c.handleCompleteRecoveries))
	mux.HandleFunc("POST /v1/partitions/complete-moves", writeAs[CompleteMovesRequest](c, c.handleCompleteMoves))
	mux.HandleFunc("POST /v1/producer-ids", writeAs[ProducerIDsRequest](c, c.handleProducerIDs))
	mux.HandleFunc("POST /v1/objects/prepare", writeAs[PrepareObjectRequest](c, c.handlePrepareObject))
	mux.HandleFunc("POST /v1/objects/commit", writeAs[CommitObjectRequest](c, c.handleCommitObject))
	mux.HandleFunc("POST /v1/objects/delete", writeAs[DeleteObjectsRequest](c, c.handleDeleteObjects))
	mux.HandleFunc("POST /v1/scram", writeAs[ScramRequest](c, c.handleAlterScram))
	c.aclRoutes(mux)
	mux.HandleFunc("GET /v1/metadata", c.handleMetadata)
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, c.Status()) })
	// The balancer's state lives on the leader: a follower forwards, like a write.
	mux.HandleFunc("GET /v1/balancer", c.write(func(*http.Request, []byte) (any, error) { return c.bal.status(), nil }, nil))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, fmt.Errorf("%w: %s %s", errNotFound, r.Method, r.URL.Path))
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
					writeError(rec, fmt.Errorf("%w: %v", errInternal, p))
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
		writeError(w, fmt.Errorf("%w: request forwarded by %s, but controller %d is not the leader", ErrNotLeader, r.Header.Get(forwardedHeader), c.cfg.NodeID))
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
			if !isDialError(err) {
				// The leader may have acted on it: the client must decide (retry is safe).
				writeError(w, fmt.Errorf("%w: forwarding to the leader at %s: %v", ErrUnavailable, api, err))
				return
			}
			failed = api
		}
		if time.Now().After(deadline) {
			writeError(w, fmt.Errorf("%w: controller %d knows no reachable leader", ErrNotLeader, c.cfg.NodeID))
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-c.ctx.Done():
			writeError(w, fmt.Errorf("%w: controller shutting down", ErrUnavailable))
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

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
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
			return nil, fmt.Errorf("%w: body larger than %d bytes", ErrBadRequest, limit)
		}
		return nil, fmt.Errorf("%w: reading body: %v", ErrBadRequest, err)
	}
	return b, nil
}

// decode parses a JSON body into v; anything malformed is a bad request.
func decode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return fmt.Errorf("%w: empty body", ErrBadRequest)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(APIError{Code: "internal", Message: err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, err error) {
	code, status := errorCode(err)
	writeJSON(w, status, APIError{Code: code, Message: err.Error(), Also: alsoCodes(err, code)})
}
