package kafka

// Authorization (security/acl): when Config.Authorizer is set, every request's context
// carries an acl.Session (who the client is, from where, and the current View's ACLs),
// and each handler asks for the operation it needs on the resources it touches before
// touching them, answering Kafka's *_AUTHORIZATION_FAILED codes per topic, group or
// request as Kafka's KafkaApis does. With no authorizer no session is attached and
// every check allows. The group APIs are checked by the group coordinator
// (broker/group/authz.go) from the same session.
//
// Inter-broker requests (InternalKey) are not checked here: they are not a client's, and
// authenticating inter-broker connections is their own business (broker/peer/auth.go).

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/weir-io/weir/security/acl"
)

// session is the ACL session of a request of c; nil when the authorizer is off.
func (s *Server) session(c *conn) *acl.Session {
	if s.cfg.Authorizer == nil {
		return nil
	}
	// One per connection, made again only when the principal changes (SASL
	// re-authentication as the same user keeps it; as another is refused anyway).
	p := c.Principal()
	if ss := c.aclSession.Load(); ss != nil && ss.Principal == p {
		return ss
	}
	host, _, err := net.SplitHostPort(c.nc.RemoteAddr().String())
	if err != nil {
		host = c.nc.RemoteAddr().String()
	}
	ss := &acl.Session{Principal: p, Host: host, Authorizer: s.cfg.Authorizer, ACLs: s.acls}
	c.aclSession.Store(ss)
	return ss
}

func (s *Server) acls() *acl.Set { return s.meta.View().ACLSet() }

// withSession attaches c's session to ctx (nothing when the authorizer is off).
func (s *Server) withSession(ctx context.Context, c *conn) context.Context {
	if ss := s.session(c); ss != nil {
		return acl.NewContext(ctx, ss)
	}
	return ctx
}

// Shorthands for the handlers: the request of ctx may do op on the resource.

func allowedTopic(ctx context.Context, op acl.Operation, topic string) bool {
	return acl.Allowed(ctx, op, acl.ResourceTopic, topic)
}

func allowedCluster(ctx context.Context, op acl.Operation) bool {
	return acl.Allowed(ctx, op, acl.ResourceCluster, acl.ClusterName)
}

// allowedCreate: creating a topic needs Create on the cluster or on the topic.
func allowedCreate(ctx context.Context, topic string) bool {
	return allowedCluster(ctx, acl.OpCreate) || allowedTopic(ctx, acl.OpCreate, topic)
}

// errTopicAuthorization answers a topic the client may not use as asked.
var errTopicAuthorization = kerr.TopicAuthorizationFailed
