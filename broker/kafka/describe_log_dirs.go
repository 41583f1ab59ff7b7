package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/security/acl"
)

// DescribeLogDirs (key 35, KIP-113), what kafka-log-dirs.sh and `weir partition
// describe` ask: where the data of the partitions led by this broker lives. Weir has no
// local log directories: a partition's recent data is in WAL directories on the shared
// file system (its own and, after moves and failovers, other brokers'), the rest in
// object storage. Each of those is answered as a log dir, named by its path (a WAL
// directory) or "objects:<store>", with the partition's bytes in it; OffsetLag is 0
// (no replica lags: there is one copy). TotalBytes and UsableBytes (v4) are -1, unknown:
// the shared file system's capacity is provisioned outside Weir.
//
// Kafka answers with the dirs of this broker's replicas; the CLUSTER DESCRIBE ACL is
// required (without it: CLUSTER_AUTHORIZATION_FAILED, v3+, and nothing listed).
func init() {
	register(api{key: 35, min: 0, max: 4, handle: answer((*Server).handleDescribeLogDirs)})
}

func (s *Server) handleDescribeLogDirs(ctx context.Context, req *kmsg.DescribeLogDirsRequest) *kmsg.DescribeLogDirsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !allowedCluster(ctx, acl.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	sd, ok := s.be.(StorageDescriber)
	if !ok {
		return resp
	}
	var want map[string]map[int32]bool // nil: all
	if req.Topics != nil {
		want = map[string]map[int32]bool{}
		for _, rt := range req.Topics {
			if want[rt.Topic] == nil {
				want[rt.Topic] = map[int32]bool{}
			}
			for _, p := range rt.Partitions {
				want[rt.Topic][p] = true
			}
		}
	}
	for _, d := range sd.LogDirs() {
		rd := kmsg.NewDescribeLogDirsResponseDir()
		rd.Dir = d.Dir
		byTopic := map[string]int{}
		for _, p := range d.Partitions {
			if want != nil && !want[p.Topic][p.Partition] {
				continue
			}
			i, ok := byTopic[p.Topic]
			if !ok {
				i = len(rd.Topics)
				byTopic[p.Topic] = i
				rt := kmsg.NewDescribeLogDirsResponseDirTopic()
				rt.Topic = p.Topic
				rd.Topics = append(rd.Topics, rt)
			}
			rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			rp.Partition, rp.Size = p.Partition, p.Bytes
			rd.Topics[i].Partitions = append(rd.Topics[i].Partitions, rp)
		}
		if len(rd.Topics) > 0 || want == nil {
			resp.Dirs = append(resp.Dirs, rd)
		}
	}
	return resp
}
