package group

// Authorization of the group APIs (security/acl), as Kafka's KafkaApis does it. The
// broker attaches the request's acl.Session to ctx when its authorizer is on; without
// one every check allows. Checks run before the ownership check, so a client learns
// nothing about groups it may not see:
//   - JoinGroup, SyncGroup, Heartbeat, LeaveGroup: Read on the group.
//   - OffsetCommit: Read on the group, Read on each topic (TOPIC_AUTHORIZATION_FAILED
//     per partition; the others are committed).
//   - OffsetFetch: Describe on each group; Describe on each topic asked for
//     (TOPIC_AUTHORIZATION_FAILED), and a fetch of all topics leaves out the others.
//   - DescribeGroups: Describe, DeleteGroups: Delete, each group on its own.
//   - ListGroups: Describe on the cluster lists all, otherwise only the groups the
//     client may describe.
//   - OffsetDelete: Delete on the group, Read on each topic.
//   - ConsumerGroupHeartbeat: Read on the group, Describe on each subscribed topic name
//     (TOPIC_AUTHORIZATION_FAILED). ConsumerGroupDescribe: Describe on each group, and a
//     group whose assignments name a topic the client may not describe answers
//     TOPIC_AUTHORIZATION_FAILED.
//   - TxnOffsetCommit: Write on the transactional ID (else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED), Read on the group, Read on each topic.
// A request denied in part is served for the rest and the denied parts are merged into
// its answer.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/security/acl"
)

var (
	groupDenied = kerr.GroupAuthorizationFailed.Code
	topicDenied = kerr.TopicAuthorizationFailed.Code
)

// authorize checks req against the session of ctx. It returns the request to serve
// (with the denied parts removed) and the respond to answer it with (merging the denied
// parts back), or ok false when it has answered req itself.
func authorize(ctx context.Context, req kmsg.Request, respond func(kmsg.Response)) (kmsg.Request, func(kmsg.Response), bool) {
	ss := acl.FromContext(ctx)
	if ss == nil {
		return req, respond, true
	}
	group := func(op acl.Operation, name string) bool { return ss.Allowed(op, acl.ResourceGroup, name) }
	topic := func(op acl.Operation, name string) bool { return ss.Allowed(op, acl.ResourceTopic, name) }
	deny := func() (kmsg.Request, func(kmsg.Response), bool) {
		respond(errorResponse(req, groupDenied))
		return nil, nil, false
	}
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		if !group(acl.OpRead, r.Group) {
			return deny()
		}
	case *kmsg.SyncGroupRequest:
		if !group(acl.OpRead, r.Group) {
			return deny()
		}
	case *kmsg.HeartbeatRequest:
		if !group(acl.OpRead, r.Group) {
			return deny()
		}
	case *kmsg.LeaveGroupRequest:
		if !group(acl.OpRead, r.Group) {
			return deny()
		}
	case *kmsg.OffsetCommitRequest:
		if !group(acl.OpRead, r.Group) {
			return deny()
		}
		cp := *r
		var denied []kmsg.OffsetCommitResponseTopic
		cp.Topics, denied = split(r.Topics, func(t kmsg.OffsetCommitRequestTopic) bool { return topic(acl.OpRead, t.Topic) },
			func(t kmsg.OffsetCommitRequestTopic) kmsg.OffsetCommitResponseTopic {
				rt := kmsg.NewOffsetCommitResponseTopic()
				rt.Topic, rt.TopicID = t.Topic, t.TopicID
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetCommitResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, topicDenied
					rt.Partitions = append(rt.Partitions, rp)
				}
				return rt
			})
		if len(denied) == 0 {
			return req, respond, true
		}
		return &cp, func(resp kmsg.Response) {
			if or, ok := resp.(*kmsg.OffsetCommitResponse); ok {
				or.Topics = append(or.Topics, denied...)
			}
			respond(resp)
		}, true
	case *kmsg.TxnOffsetCommitRequest:
		if !ss.Allowed(acl.OpWrite, acl.ResourceTransactionalID, r.TransactionalID) {
			respond(errorResponse(req, kerr.TransactionalIDAuthorizationFailed.Code))
			return nil, nil, false
		}
		if !group(acl.OpRead, r.Group) {
			return deny()
		}
		cp := *r
		var denied []kmsg.TxnOffsetCommitResponseTopic
		cp.Topics, denied = split(r.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) bool { return topic(acl.OpRead, t.Topic) },
			func(t kmsg.TxnOffsetCommitRequestTopic) kmsg.TxnOffsetCommitResponseTopic {
				return txnCommitTopicError(t, topicDenied)
			})
		if len(denied) == 0 {
			return req, respond, true
		}
		return &cp, func(resp kmsg.Response) {
			if tr, ok := resp.(*kmsg.TxnOffsetCommitResponse); ok {
				tr.Topics = append(tr.Topics, denied...)
			}
			respond(resp)
		}, true
	case *kmsg.OffsetDeleteRequest:
		if !group(acl.OpDelete, r.Group) {
			return deny()
		}
		cp := *r
		var denied []kmsg.OffsetDeleteResponseTopic
		cp.Topics, denied = split(r.Topics, func(t kmsg.OffsetDeleteRequestTopic) bool { return topic(acl.OpRead, t.Topic) },
			func(t kmsg.OffsetDeleteRequestTopic) kmsg.OffsetDeleteResponseTopic {
				rt := kmsg.NewOffsetDeleteResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetDeleteResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, topicDenied
					rt.Partitions = append(rt.Partitions, rp)
				}
				return rt
			})
		if len(denied) == 0 {
			return req, respond, true
		}
		return &cp, func(resp kmsg.Response) {
			if or, ok := resp.(*kmsg.OffsetDeleteResponse); ok {
				or.Topics = append(or.Topics, denied...)
			}
			respond(resp)
		}, true
	case *kmsg.OffsetFetchRequest:
		return authorizeOffsetFetch(r, respond, group, topic)
	case *kmsg.DescribeGroupsRequest:
		cp := *r
		var denied []kmsg.DescribeGroupsResponseGroup
		cp.Groups, denied = split(r.Groups, func(g string) bool { return group(acl.OpDescribe, g) },
			func(g string) kmsg.DescribeGroupsResponseGroup {
				dg := kmsg.NewDescribeGroupsResponseGroup()
				dg.Group, dg.ErrorCode = g, groupDenied
				return dg
			})
		return &cp, func(resp kmsg.Response) {
			if dr, ok := resp.(*kmsg.DescribeGroupsResponse); ok {
				dr.Groups = append(dr.Groups, denied...)
			}
			respond(resp)
		}, true
	case *kmsg.ConsumerGroupHeartbeatRequest:
		if !group(acl.OpRead, r.Group) {
			return deny()
		}
		for _, t := range r.SubscribedTopicNames {
			if !topic(acl.OpDescribe, t) {
				respond(errorResponse(req, topicDenied))
				return nil, nil, false
			}
		}
	case *kmsg.ConsumerGroupDescribeRequest:
		cp := *r
		var denied []kmsg.ConsumerGroupDescribeResponseGroup
		cp.Groups, denied = split(r.Groups, func(g string) bool { return group(acl.OpDescribe, g) },
			func(g string) kmsg.ConsumerGroupDescribeResponseGroup {
				dg := kmsg.NewConsumerGroupDescribeResponseGroup()
				dg.Group, dg.ErrorCode = g, groupDenied
				return dg
			})
		return &cp, func(resp kmsg.Response) {
			if dr, ok := resp.(*kmsg.ConsumerGroupDescribeResponse); ok {
				// A group whose members hold a topic the client may not describe is
				// not shown (Kafka: TOPIC_AUTHORIZATION_FAILED).
				for i := range dr.Groups {
					dg := &dr.Groups[i]
					for _, m := range dg.Members {
						for _, a := range []kmsg.Assignment{m.Assignment, m.TargetAssignment} {
							for _, tp := range a.TopicPartitions {
								if dg.ErrorCode == 0 && !topic(acl.OpDescribe, tp.Topic) {
									name := dg.Group
									*dg = kmsg.NewConsumerGroupDescribeResponseGroup()
									dg.Group, dg.ErrorCode = name, topicDenied
								}
							}
						}
					}
				}
				dr.Groups = append(dr.Groups, denied...)
			}
			respond(resp)
		}, true
	case *kmsg.DeleteGroupsRequest:
		cp := *r
		var denied []kmsg.DeleteGroupsResponseGroup
		cp.Groups, denied = split(r.Groups, func(g string) bool { return group(acl.OpDelete, g) },
			func(g string) kmsg.DeleteGroupsResponseGroup {
				dg := kmsg.NewDeleteGroupsResponseGroup()
				dg.Group, dg.ErrorCode = g, groupDenied
				return dg
			})
		return &cp, func(resp kmsg.Response) {
			if dr, ok := resp.(*kmsg.DeleteGroupsResponse); ok {
				dr.Groups = append(dr.Groups, denied...)
			}
			respond(resp)
		}, true
	case *kmsg.ListGroupsRequest:
		if ss.Allowed(acl.OpDescribe, acl.ResourceCluster, acl.ClusterName) {
			return req, respond, true
		}
		return req, func(resp kmsg.Response) {
			if lr, ok := resp.(*kmsg.ListGroupsResponse); ok {
				kept := lr.Groups[:0]
				for _, g := range lr.Groups {
					if group(acl.OpDescribe, g.Group) {
						kept = append(kept, g)
					}
				}
				lr.Groups = kept
			}
			respond(resp)
		}, true
	}
	return req, respond, true
}

// split keeps the items allowed in a new slice and turns each other one into its denied
// answer.
func split[In, Out any](items []In, allowed func(In) bool, denied func(In) Out) ([]In, []Out) {
	kept := make([]In, 0, len(items))
	var out []Out
	for _, it := range items {
		if allowed(it) {
			kept = append(kept, it)
		} else {
			out = append(out, denied(it))
		}
	}
	return kept, out
}

// authorizeOffsetFetch: groups the client may not describe are answered
// GROUP_AUTHORIZATION_FAILED (the whole answer before v8, that group's from v8); in the
// rest, topics it may not describe get TOPIC_AUTHORIZATION_FAILED when asked for by name
// and are left out of an all-topics fetch.
func authorizeOffsetFetch(r *kmsg.OffsetFetchRequest, respond func(kmsg.Response), group, topic func(acl.Operation, string) bool) (kmsg.Request, func(kmsg.Response), bool) {
	// fix rewrites one group's topics in an answer.
	fix := func(all bool, n int, name func(int) string, partitions func(int) int, deny func(i, j int)) []int {
		var keep []int
		for i := 0; i < n; i++ {
			if topic(acl.OpDescribe, name(i)) {
				keep = append(keep, i)
				continue
			}
			if all {
				continue
			}
			keep = append(keep, i)
			for j := 0; j < partitions(i); j++ {
				deny(i, j)
			}
		}
		return keep
	}
	if r.Version < 8 {
		if !group(acl.OpDescribe, r.Group) {
			respond(errorResponse(r, groupDenied))
			return nil, nil, false
		}
		all := r.Topics == nil && r.Version >= 2
		return r, func(resp kmsg.Response) {
			if or, ok := resp.(*kmsg.OffsetFetchResponse); ok {
				ts := or.Topics
				keep := fix(all, len(ts), func(i int) string { return ts[i].Topic }, func(i int) int { return len(ts[i].Partitions) },
					func(i, j int) {
						p := &ts[i].Partitions[j]
						p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, nil, topicDenied
					})
				out := make([]kmsg.OffsetFetchResponseTopic, 0, len(keep))
				for _, i := range keep {
					out = append(out, ts[i])
				}
				or.Topics = out
			}
			respond(resp)
		}, true
	}
	cp := *r
	cp.Groups = make([]kmsg.OffsetFetchRequestGroup, 0, len(r.Groups))
	var denied []kmsg.OffsetFetchResponseGroup
	all := map[string]bool{}
	for _, g := range r.Groups {
		if !group(acl.OpDescribe, g.Group) {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, groupDenied
			denied = append(denied, rg)
			continue
		}
		all[g.Group] = g.Topics == nil
		cp.Groups = append(cp.Groups, g)
	}
	return &cp, func(resp kmsg.Response) {
		if or, ok := resp.(*kmsg.OffsetFetchResponse); ok {
			for gi := range or.Groups {
				ts := or.Groups[gi].Topics
				keep := fix(all[or.Groups[gi].Group], len(ts), func(i int) string { return ts[i].Topic }, func(i int) int { return len(ts[i].Partitions) },
					func(i, j int) {
						p := &ts[i].Partitions[j]
						p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, nil, topicDenied
					})
				out := make([]kmsg.OffsetFetchResponseGroupTopic, 0, len(keep))
				for _, i := range keep {
					out = append(out, ts[i])
				}
				or.Groups[gi].Topics = out
			}
			or.Groups = append(or.Groups, denied...)
		}
		respond(resp)
	}, true
}
