package kafka

// DescribeCluster (key 60), versions 0-1.
//
// Returns the cluster ID, controller and brokers with racks (on a zone listener, each
// broker's listener of that zone when it has one). v1's endpoint type 2
// (controllers) is not served: Weir's controllers speak their own API, not Kafka's.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/security/acl"
)

func init() {
	register(api{key: 60, min: 0, max: 1, handle: answer((*Server).handleDescribeCluster)})
}

func (s *Server) handleDescribeCluster(ctx context.Context, req *kmsg.DescribeClusterRequest) *kmsg.DescribeClusterResponse {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		return resp
	}
	if !allowedCluster(ctx, acl.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	view := s.meta.View()
	lname := listenerNameFrom(ctx) // on a named (or zone) listener: each broker's listener of that name
	resp.ClusterID = view.ClusterID
	resp.ControllerID = view.ControllerID
	for _, br := range view.Brokers {
		if !br.Active() {
			continue // fenced brokers are not offered to clients
		}
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID = br.ID
		rb.Host, rb.Port = br.Endpoint(lname)
		if br.Rack != "" {
			r := br.Rack
			rb.Rack = &r
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
	return resp
}
