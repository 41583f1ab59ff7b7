package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/security/acl"
)

// DescribeUserScramCredentials (key 50), version 0: the mechanisms and iteration counts
// of users' SCRAM credentials (never salts or keys), from this broker's View. Null or
// empty users: every user with a credential; a user asked for twice: DUPLICATE_RESOURCE;
// a user without credentials: RESOURCE_NOT_FOUND (Kafka's answers).
func init() {
	register(api{key: 50, min: 0, max: 0, handle: handleDescribeUserScram})
}

func handleDescribeUserScram(s *Server, c *conn, sl *slot, req kmsg.Request) {
	r := req.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	// Describe on the cluster, as Kafka asks (with the authorizer off: anyone).
	if !allowedCluster(s.withSession(c.ctx, c), acl.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		sl.respond(resp)
		return
	}
	users := s.meta.View().Scram
	names := make([]string, 0, len(r.Users))
	for _, u := range r.Users {
		names = append(names, u.Name)
	}
	if len(names) == 0 {
		names = users.Names()
	}
	count := map[string]int{}
	for _, n := range names {
		count[n]++
	}
	done := map[string]bool{}
	for _, n := range names {
		if done[n] {
			continue
		}
		done[n] = true
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = n
		switch creds := users[n]; {
		case count[n] > 1:
			msg := "Cannot describe SCRAM credentials for the same user twice in a single request"
			res.ErrorCode, res.ErrorMessage = kerr.DuplicateResource.Code, &msg
		case len(creds) == 0:
			msg := "Attempt to describe a user credential that does not exist"
			res.ErrorCode, res.ErrorMessage = kerr.ResourceNotFound.Code, &msg
		default:
			for _, cr := range creds {
				info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				info.Mechanism, info.Iterations = int8(cr.Mechanism), cr.Iterations
				res.CredentialInfos = append(res.CredentialInfos, info)
			}
		}
		resp.Results = append(resp.Results, res)
	}
	sl.respond(resp)
}
