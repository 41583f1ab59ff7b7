package broker

import (
	"net"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker/group"
)

// apiRange is the version range the broker implements for one API key.
type apiRange struct{ min, max int16 }

// apiVersions is the single table behind both ApiVersions answers and dispatch: a key is
// served only if it is listed here. Maximum versions stop before versions whose semantics
// Weir does not implement (e.g. Produce v12+ transactions v2, Produce v13 and Metadata v13
// changes); minimum versions stay low for old clients.
var apiVersions = func() map[int16]apiRange {
	m := map[int16]apiRange{
		0:  {3, 11}, // Produce: v3+ carries record batch v2 only
		1:  {4, 16}, // Fetch: v4+ has isolation level and last stable offset; v13+ topic IDs
		2:  {1, 8},  // ListOffsets
		3:  {0, 12}, // Metadata
		10: {0, 6},  // FindCoordinator
		18: {0, 4},  // ApiVersions
		19: {0, 7},  // CreateTopics
		20: {0, 6},  // DeleteTopics
		21: {0, 2},  // DeleteRecords
		22: {0, 4},  // InitProducerId
		23: {0, 4},  // OffsetForLeaderEpoch
		32: {0, 4},  // DescribeConfigs
		37: {0, 3},  // CreatePartitions
		44: {0, 1},  // IncrementalAlterConfigs
		60: {0, 1},  // DescribeCluster
	}
	for k, max := range group.MaxVersions() {
		m[k] = apiRange{0, max}
	}
	return m
}()

// dispatch routes one parsed request to its handler. Handlers run on the connection's
// reader goroutine and must not block for long: anything that waits (WAL sync, fetch
// long-poll, group rebalance) answers s later from elsewhere.
func (b *Broker) dispatch(c *conn, s *slot, req kmsg.Request) {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		b.handleProduce(c, s, r)
	case *kmsg.FetchRequest:
		b.handleFetch(c, s, r)
	case *kmsg.ListOffsetsRequest:
		s.respond(b.handleListOffsets(r))
	case *kmsg.MetadataRequest:
		s.respond(b.handleMetadata(c.ctx, r))
	case *kmsg.FindCoordinatorRequest:
		s.respond(b.handleFindCoordinator(c.ctx, r))
	case *kmsg.ApiVersionsRequest:
		s.respond(apiVersionsResponse(r.Version))
	case *kmsg.CreateTopicsRequest:
		s.respond(b.handleCreateTopics(c.ctx, r))
	case *kmsg.DeleteTopicsRequest:
		s.respond(b.handleDeleteTopics(c.ctx, r))
	case *kmsg.DeleteRecordsRequest:
		s.respond(b.handleDeleteRecords(c.ctx, r))
	case *kmsg.InitProducerIDRequest:
		s.respond(b.handleInitProducerID(c.ctx, r))
	case *kmsg.OffsetForLeaderEpochRequest:
		s.respond(b.handleOffsetForLeaderEpoch(r))
	case *kmsg.DescribeConfigsRequest:
		s.respond(b.handleDescribeConfigs(r))
	case *kmsg.CreatePartitionsRequest:
		s.respond(b.handleCreatePartitions(c.ctx, r))
	case *kmsg.IncrementalAlterConfigsRequest:
		s.respond(b.handleIncrementalAlterConfigs(c.ctx, r))
	case *kmsg.DescribeClusterRequest:
		s.respond(b.handleDescribeCluster(r))
	default:
		// Group APIs: the coordinator answers, possibly after a rebalance.
		host, _, _ := net.SplitHostPort(c.nc.RemoteAddr().String())
		b.groups.Handle(group.WithClientInfo(c.ctx, s.clientID, "/"+host), req, s.respond)
	}
}

// apiVersionsResponse lists apiVersions in key order.
func apiVersionsResponse(version int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(version)
	keys := make([]int, 0, len(apiVersions))
	for k := range apiVersions {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	for _, k := range keys {
		r := apiVersions[int16(k)]
		ak := kmsg.NewApiVersionsResponseApiKey()
		ak.ApiKey, ak.MinVersion, ak.MaxVersion = int16(k), r.min, r.max
		resp.ApiKeys = append(resp.ApiKeys, ak)
	}
	return resp
}
