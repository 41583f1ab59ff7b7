package broker

// FindCoordinator (key 10), versions 0-6.
//
// Group coordination lives on this broker (with a controller quorum, the broker that leads
// the group's offsets partition). Transactions are not supported, so transaction
// coordinator lookups get COORDINATOR_NOT_AVAILABLE with a message saying so. v4+ batch
// several keys in one request.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleFindCoordinator(req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	self := b.Advertised()
	answer := func(key string) (int16, *string) {
		switch req.CoordinatorType {
		case 0:
			if key == "" {
				msg := "group id must not be empty"
				return kerr.InvalidGroupID.Code, &msg
			}
			return 0, nil
		default:
			msg := "Weir does not support transactions"
			return kerr.CoordinatorNotAvailable.Code, &msg
		}
	}
	if req.Version <= 3 {
		code, msg := answer(req.CoordinatorKey)
		resp.ErrorCode, resp.ErrorMessage = code, msg
		resp.NodeID, resp.Host, resp.Port = -1, "", -1
		if code == 0 {
			resp.NodeID, resp.Host, resp.Port = self.ID, self.Host, self.Port
		}
		return resp
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.ErrorCode, c.ErrorMessage = answer(key)
		c.NodeID, c.Host, c.Port = -1, "", -1
		if c.ErrorCode == 0 {
			c.NodeID, c.Host, c.Port = self.ID, self.Host, self.Port
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp
}
