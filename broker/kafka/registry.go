package kafka

import (
	"context"
	"fmt"
	"net"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker/group"
)

// One registry of API keys: each handler file registers its key, its version range and
// its handler in an init function; ApiVersions answers from this table and the reader
// accepts only the keys and versions in it, so a key is advertised if and only if a
// handler serves it. Maximum versions stop before versions whose semantics Weir does not
// implement (e.g. Produce v12+ transactions v2, Metadata v13 changes); minimum versions
// stay low for old clients. The table is filled before main runs and only read afterwards.

// handler serves one request; it must answer sl exactly once (possibly later, from any
// goroutine).
type handler func(s *Server, c *conn, sl *slot, req kmsg.Request)

type api struct {
	key      int16
	min, max int16
	// blocking handlers may wait on the controller, on object storage or on a long poll;
	// they run on their own goroutine so the connection keeps reading requests.
	blocking bool
	// internal keys (inter-broker) are served but never advertised.
	internal bool
	// newReq makes the request type of a key kmsg does not know.
	newReq func() kmsg.Request
	// on, when set, says whether this server serves (and advertises) the key: a
	// feature that is off (transactions without a coordinator) is an unknown key.
	on     func(*Server) bool
	handle handler
}

var apis = map[int16]api{}

func register(a api) {
	if _, dup := apis[a.key]; dup {
		panic(fmt.Sprintf("kafka: API key %d registered twice", a.key))
	}
	if a.handle == nil || a.min < 0 || a.min > a.max {
		panic(fmt.Sprintf("kafka: bad registration of API key %d", a.key))
	}
	apis[a.key] = a
}

// answer adapts a handler that computes its response synchronously.
func answer[R kmsg.Request, P kmsg.Response](fn func(s *Server, ctx context.Context, req R) P) handler {
	return func(s *Server, c *conn, sl *slot, req kmsg.Request) {
		ctx := withZone(withListenerName(s.withSession(c.ctx, c), c.lis.Name), s.clientZone(c, sl.clientID, s.meta.View()))
		sl.respond(fn(s, ctx, req.(R)))
	}
}

// The group APIs are answered by the group coordinator, which never blocks: it answers
// later from its own goroutines (a rebalance, a durable commit).
func init() {
	for key, max := range group.MaxVersions() {
		register(api{key: key, min: 0, max: max, handle: handleGroup})
	}
	// TxnOffsetCommit: the coordinator serves it once transactions are on.
	register(api{key: 28, min: 0, max: group.TxnOffsetCommitMaxVersion, on: txnOn, handle: handleGroup})
}

func handleGroup(s *Server, c *conn, sl *slot, req kmsg.Request) {
	host, _, _ := net.SplitHostPort(c.nc.RemoteAddr().String())
	ctx := group.WithClientInfo(s.withSession(c.ctx, c), sl.clientID, "/"+host)
	switch req.(type) {
	case *kmsg.ListGroupsRequest, *kmsg.DeleteGroupsRequest:
		if s.share != nil { // share groups are loaded and deleted through their store: not on the reader
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer func() {
					if r := recover(); r != nil {
						s.recovered(c, req.Key(), r)
					}
				}()
				req, respond := s.shareGroupAdmin(ctx, req, sl.respond) // share_admin.go
				s.groups.Handle(ctx, req, respond)
			}()
			return
		}
	}
	s.groups.Handle(ctx, req, sl.respond)
}

// dispatch runs the handler of a parsed request (parse only lets registered keys and
// versions through).
func (s *Server) dispatch(c *conn, sl *slot, req kmsg.Request) {
	a := apis[req.Key()]
	if !a.blocking {
		s.runHandler(a, c, sl, req)
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.runHandler(a, c, sl, req)
	}()
}

// runHandler runs a handler; a panic in it closes the connection (whose writer then
// stops waiting for the slot) and is counted and logged, and the broker goes on. The
// group coordinator's handlers are covered up to their return; answers it sends later
// from its own goroutines only call sl.respond.
func (s *Server) runHandler(a api, c *conn, sl *slot, req kmsg.Request) {
	defer func() {
		if r := recover(); r != nil {
			s.recovered(c, a.key, r)
		}
	}()
	a.handle(s, c, sl, req)
}

// served reports whether s serves a's key.
func (a api) served(s *Server) bool { return a.on == nil || (s != nil && a.on(s)) }

// apiVersionsResponse lists the registry in key order: the keys s serves (s nil: those
// served whatever the configuration).
func apiVersionsResponse(s *Server, version int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(version)
	keys := make([]int, 0, len(apis))
	for k := range apis {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	for _, k := range keys {
		a := apis[int16(k)]
		if a.internal || !a.served(s) {
			continue
		}
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = a.key, a.min, a.max
		resp.ApiKeys = append(resp.ApiKeys, ak)
	}
	return resp
}
