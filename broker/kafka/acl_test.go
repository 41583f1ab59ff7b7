package kafka

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker/group"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security"
	"github.com/weir-io/weir/security/acl"
	"github.com/weir-io/weir/security/tlsconf"
	"github.com/weir-io/weir/security/tlstest"
)

// The ACL tests run a front end on a TLS listener that requires client certificates:
// a client's principal is User:<CN of its certificate> (a mapping rule of its DN
// CN=<name>), the path a user of mutual TLS takes. User:admin is a super user; the others get what the admin grants them with
// kadm (CreateAcls over the same listener).

type aclEnv struct {
	s    *Server
	meta *metadata.LocalStore
	addr string
	ca   *tlstest.CA
	dir  string
}

func startACLServer(t *testing.T, mods ...func(*Config)) *aclEnv {
	t.Helper()
	dir := t.TempDir()
	ca, err := tlstest.NewCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Issue("server", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	src, err := tlsconf.New(tlsconf.Files{CertFile: srv.CertFile, KeyFile: srv.KeyFile, CAFile: ca.CAFile, ClientAuth: "require"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	meta, err := metadata.OpenLocal(metadata.LocalConfig{Path: filepath.Join(dir, "metadata.json"), Self: metadata.Broker{ID: 0, Host: "127.0.0.1", Port: port}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range []string{"t", "t-del", "t-alter", "other"} {
		if _, err := meta.CreateTopic(context.Background(), metadata.TopicSpec{Name: tp, Partitions: 2, ReplicationFactor: -1}, false); err != nil {
			t.Fatal(err)
		}
	}
	gcfg := group.DefaultConfig()
	gcfg.InitialRebalanceDelay = 0
	gcfg.Transactions = true // TxnOffsetCommit served, as with a coordinator
	groups := group.New(gcfg, nopOffsets{}, allTopics{})
	t.Cleanup(groups.Close)
	cfg := Config{MaxRequestBytes: 1 << 20, MaxInFlight: 16, DefaultPartitions: 1, BrokerConfigs: map[string]string{"broker.id": "0"},
		Authorizer: acl.NewAuthorizer([]security.Principal{"User:admin"}, false)}
	// The test certificates' subject is CN=<user> alone; map it to the plain name, as a
	// deployment naming its users by CN would (principals are the full DN by default).
	rules, err := tlsconf.ParsePrincipalRules("RULE:^CN=([^,]*)$/$1/")
	if err != nil {
		t.Fatal(err)
	}
	cfg.PrincipalRules = rules
	for _, m := range mods {
		m(&cfg)
	}
	s := NewServer(cfg,
		Deps{Meta: meta, Backend: &fakeBackend{meta: meta}, Groups: groups, Txn: fakeTxnOff{}, Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.ServeListener(ln, Listener{TLS: src.Server()})
	t.Cleanup(s.Close)
	return &aclEnv{s: s, meta: meta, addr: ln.Addr().String(), ca: ca, dir: dir}
}

// cert issues a client certificate with common name user.
func (e *aclEnv) cert(t *testing.T, user string) tlstest.Pair {
	t.Helper()
	p, err := e.ca.Issue("client-"+user, user)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// client is a franz-go client authenticated as User:<user> by its certificate.
func (e *aclEnv) client(t *testing.T, user string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	p := e.cert(t, user)
	src, err := tlsconf.New(tlsconf.Files{CertFile: p.CertFile, KeyFile: p.KeyFile, CAFile: e.ca.CAFile}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(e.addr), kgo.DialTLSConfig(src.Client()), kgo.RetryTimeout(5 * time.Second),
		kgo.RequestRetries(2)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// grant creates ACLs as the super user, with kadm.
func (e *aclEnv) grant(t *testing.T, admin *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := admin.CreateACLs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create ACL %+v: %v %s", r, r.Err, r.ErrMessage)
		}
	}
}

// errorCodes collects every ErrorCode field of a response, at any depth.
func errorCodes(v reflect.Value, out *[]int16) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			errorCodes(v.Elem(), out)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if f := v.Type().Field(i); f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16 {
				*out = append(*out, int16(v.Field(i).Int()))
			} else {
				errorCodes(v.Field(i), out)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := 0; i < v.Len(); i++ {
			errorCodes(v.Index(i), out)
		}
	}
}

var authCodes = []int16{kerr.TopicAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Code, kerr.TransactionalIDAuthorizationFailed.Code}

func codesOf(resp kmsg.Response) []int16 {
	var out []int16
	errorCodes(reflect.ValueOf(resp), &out)
	return out
}

// aclCase is one request of the matrix: a principal with the ACLs needed is served (no
// authorization error), one without gets want.
type aclCase struct {
	key  int16
	name string
	req  func(e *aclEnv) kmsg.Request
	want int16
}

func aclMatrix() []aclCase {
	str := func(s string) *string { return &s }
	topicID := func(e *aclEnv, name string) [16]byte { return e.meta.View().Topics[name].ID }
	return []aclCase{
		{0, "Produce", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrProduceRequest()
			r.Acks, r.TimeoutMillis = -1, 5000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = []byte{}
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			return r
		}, kerr.TopicAuthorizationFailed.Code},
		{1, "Fetch", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrFetchRequest()
			r.MaxWaitMillis, r.MaxBytes = 0, 1<<20
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = "t", topicID(e, "t")
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes = 1 << 20
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			return r
		}, kerr.TopicAuthorizationFailed.Code},
		{2, "ListOffsets", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrListOffsetsRequest()
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = -1
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			return r
		}, kerr.TopicAuthorizationFailed.Code},
		{3, "Metadata", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrMetadataRequest()
			mt := kmsg.NewMetadataRequestTopic()
			mt.Topic = str("t")
			r.Topics = append(r.Topics, mt)
			return r
		}, kerr.TopicAuthorizationFailed.Code},
		{8, "OffsetCommit", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrOffsetCommitRequest()
			r.Group, r.Generation = "g", -1
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Offset = 1
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			return r
		}, kerr.GroupAuthorizationFailed.Code},
		{9, "OffsetFetch", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrOffsetFetchRequest()
			r.Group = "g"
			rt := kmsg.NewOffsetFetchRequestTopic()
			rt.Topic, rt.Partitions = "t", []int32{0}
			r.Topics = append(r.Topics, rt)
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = "g"
			gt := kmsg.NewOffsetFetchRequestGroupTopic()
			gt.Topic, gt.Partitions = "t", []int32{0}
			rg.Topics = append(rg.Topics, gt)
			r.Groups = append(r.Groups, rg)
			return r
		}, kerr.GroupAuthorizationFailed.Code},
		{10, "FindCoordinator group", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.CoordinatorKey, r.CoordinatorKeys = "g", []string{"g"}
			return r
		}, kerr.GroupAuthorizationFailed.Code},
		{10, "FindCoordinator transactional id", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrFindCoordinatorRequest()
			r.CoordinatorType = 1
			r.CoordinatorKey, r.CoordinatorKeys = "tx", []string{"tx"}
			return r
		}, kerr.TransactionalIDAuthorizationFailed.Code},
		{11, "JoinGroup", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrJoinGroupRequest()
			r.Group, r.ProtocolType = "g", "consumer"
			r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10000, 10000
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0}
			r.Protocols = append(r.Protocols, p)
			return r
		}, kerr.GroupAuthorizationFailed.Code},
		{12, "Heartbeat", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrHeartbeatRequest()
			r.Group, r.MemberID = "g", "nobody"
			return r
		}, kerr.GroupAuthorizationFailed.Code},
		{13, "LeaveGroup", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrLeaveGroupRequest()
			r.Group, r.MemberID = "g", "nobody"
			m := kmsg.NewLeaveGroupRequestMember()
			m.MemberID = "nobody"
			r.Members = append(r.Members, m)
			return r
		}, kerr.GroupAuthorizationFailed.Code},
		{14, "SyncGroup", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrSyncGroupRequest()
			r.Group, r.MemberID = "g", "nobody"
			return r
		}, kerr.GroupAuthorizationFailed.Code},
		{15, "DescribeGroups", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrDescribeGroupsRequest()
			r.Groups = []string{"g"}
			return r
		}, kerr.GroupAuthorizationFailed.Code},
		{68, "ConsumerGroupHeartbeat", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			r.Group, r.MemberID, r.MemberEpoch = "g", "m-acl", 0
			r.RebalanceTimeoutMillis, r.SubscribedTopicNames = 10000, []string{"t"}
			return r
		}, kerr.GroupAuthorizationFailed.Code},
		{69, "ConsumerGroupDescribe", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrConsumerGroupDescribeRequest()
			r.Groups = []string{"g"}
			return r
		}, kerr.GroupAuthorizationFailed.Code},
		{16, "ListGroups (filtered, no error)", func(e *aclEnv) kmsg.Request { return kmsg.NewPtrListGroupsRequest() }, 0},
		{19, "CreateTopics", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrCreateTopicsRequest()
			r.TimeoutMillis = 5000
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t-new", 1, -1
			r.Topics = append(r.Topics, rt)
			return r
		}, kerr.TopicAuthorizationFailed.Code},
		{20, "DeleteTopics", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrDeleteTopicsRequest()
			r.TimeoutMillis = 5000
			r.TopicNames = []string{"t-del"}
			dt := kmsg.NewDeleteTopicsRequestTopic()
			dt.Topic = str("t-del")
			r.Topics = append(r.Topics, dt)
			return r
		}, kerr.TopicAuthorizationFailed.Code},
		{21, "DeleteRecords", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrDeleteRecordsRequest()
			r.TimeoutMillis = 5000
			rt := kmsg.NewDeleteRecordsRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewDeleteRecordsRequestTopicPartition()
			rp.Offset = -1
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			return r
		}, kerr.TopicAuthorizationFailed.Code},
		{22, "InitProducerId", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrInitProducerIDRequest()
			r.TransactionTimeoutMillis = 60000
			return r
		}, kerr.ClusterAuthorizationFailed.Code},
		{23, "OffsetForLeaderEpoch", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrOffsetForLeaderEpochRequest()
			r.ReplicaID = -1
			rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.CurrentLeaderEpoch = -1
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			return r
		}, kerr.TopicAuthorizationFailed.Code},
		{29, "DescribeAcls", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrDescribeACLsRequest()
			r.ResourceType, r.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			r.Operation, r.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			return r
		}, kerr.ClusterAuthorizationFailed.Code},
		{30, "CreateAcls", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrCreateACLsRequest()
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "x", kmsg.ACLResourcePatternTypeLiteral
			c.Principal, c.Host, c.Operation, c.PermissionType = "User:dave", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
			r.Creations = append(r.Creations, c)
			return r
		}, kerr.ClusterAuthorizationFailed.Code},
		{31, "DeleteAcls", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrDeleteACLsRequest()
			f := kmsg.NewDeleteACLsRequestFilter()
			f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			f.Principal, f.Operation, f.PermissionType = str("User:dave"), kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			r.Filters = append(r.Filters, f)
			return r
		}, kerr.ClusterAuthorizationFailed.Code},
		{32, "DescribeConfigs topic", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrDescribeConfigsRequest()
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
			r.Resources = append(r.Resources, rr)
			return r
		}, kerr.TopicAuthorizationFailed.Code},
		{32, "DescribeConfigs broker", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrDescribeConfigsRequest()
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "0"
			r.Resources = append(r.Resources, rr)
			return r
		}, kerr.ClusterAuthorizationFailed.Code},
		{37, "CreatePartitions", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrCreatePartitionsRequest()
			r.TimeoutMillis = 5000
			rt := kmsg.NewCreatePartitionsRequestTopic()
			rt.Topic, rt.Count = "t-alter", 3
			r.Topics = append(r.Topics, rt)
			return r
		}, kerr.TopicAuthorizationFailed.Code},
		{42, "DeleteGroups", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrDeleteGroupsRequest()
			r.Groups = []string{"g-del"}
			return r
		}, kerr.GroupAuthorizationFailed.Code},
		{43, "ElectLeaders", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrElectLeadersRequest()
			r.TimeoutMillis = 5000
			rt := kmsg.NewElectLeadersRequestTopic()
			rt.Topic, rt.Partitions = "t", []int32{0}
			r.Topics = append(r.Topics, rt)
			return r
		}, kerr.ClusterAuthorizationFailed.Code},
		{44, "IncrementalAlterConfigs topic", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrIncrementalAlterConfigsRequest()
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t-alter"
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Value = "retention.ms", str("1000")
			rr.Configs = append(rr.Configs, c)
			r.Resources = append(r.Resources, rr)
			return r
		}, kerr.TopicAuthorizationFailed.Code},
		{44, "IncrementalAlterConfigs broker", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrIncrementalAlterConfigsRequest()
			rr := kmsg.NewIncrementalAlterConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "0"
			r.Resources = append(r.Resources, rr)
			return r
		}, kerr.ClusterAuthorizationFailed.Code},
		{45, "AlterPartitionReassignments", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrAlterPartitionAssignmentsRequest()
			r.TimeoutMillis = 5000
			rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			rp.Replicas = []int32{0}
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			return r
		}, kerr.ClusterAuthorizationFailed.Code},
		// Transactions (the server has a coordinator: Deps.Txn).
		{24, "AddPartitionsToTxn (v4, brokers' verify)", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrAddPartitionsToTxnRequest()
			tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
			tx.TransactionalID, tx.ProducerID, tx.VerifyOnly = "tx", 1, true
			tt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			tt.Topic, tt.Partitions = "t", []int32{0}
			tx.Topics = append(tx.Topics, tt)
			r.Transactions = append(r.Transactions, tx)
			return r
		}, kerr.ClusterAuthorizationFailed.Code},
		{25, "AddOffsetsToTxn", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrAddOffsetsToTxnRequest()
			r.TransactionalID, r.ProducerID, r.Group = "tx", 1, "g"
			return r
		}, kerr.TransactionalIDAuthorizationFailed.Code},
		{26, "EndTxn", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrEndTxnRequest()
			r.TransactionalID, r.ProducerID = "tx", 1
			return r
		}, kerr.TransactionalIDAuthorizationFailed.Code},
		{27, "WriteTxnMarkers", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrWriteTxnMarkersRequest()
			m := kmsg.NewWriteTxnMarkersRequestMarker()
			m.ProducerID = 1
			mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			mt.Topic, mt.Partitions = "t", []int32{0}
			m.Topics = append(m.Topics, mt)
			r.Markers = append(r.Markers, m)
			return r
		}, kerr.ClusterAuthorizationFailed.Code},
		{28, "TxnOffsetCommit", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrTxnOffsetCommitRequest()
			r.TransactionalID, r.Group, r.ProducerID, r.Generation = "tx", "g", 1, -1
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = "t"
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Offset = 1
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			return r
		}, kerr.TransactionalIDAuthorizationFailed.Code},
		{65, "DescribeTransactions", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrDescribeTransactionsRequest()
			r.TransactionalIDs = []string{"tx"}
			return r
		}, kerr.TransactionalIDAuthorizationFailed.Code},
		{66, "ListTransactions (filtered, no error)", func(e *aclEnv) kmsg.Request { return kmsg.NewPtrListTransactionsRequest() }, 0},
		{35, "DescribeLogDirs", func(e *aclEnv) kmsg.Request { return kmsg.NewPtrDescribeLogDirsRequest() }, kerr.ClusterAuthorizationFailed.Code},
		{61, "DescribeProducers", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrDescribeProducersRequest()
			rt := kmsg.NewDescribeProducersRequestTopic()
			rt.Topic, rt.Partitions = "t", []int32{0}
			r.Topics = append(r.Topics, rt)
			return r
		}, kerr.TopicAuthorizationFailed.Code},
		{46, "ListPartitionReassignments", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrListPartitionReassignmentsRequest()
			r.TimeoutMillis = 5000
			return r
		}, kerr.ClusterAuthorizationFailed.Code},
		{47, "OffsetDelete", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrOffsetDeleteRequest()
			r.Group = "g"
			rt := kmsg.NewOffsetDeleteRequestTopic()
			rt.Topic = "t"
			rt.Partitions = append(rt.Partitions, kmsg.NewOffsetDeleteRequestTopicPartition())
			r.Topics = append(r.Topics, rt)
			return r
		}, kerr.GroupAuthorizationFailed.Code},
		// SCRAM credentials (keys 50 and 51) are users' secrets: Describe and Alter on
		// the cluster, as in Kafka. Run only when the broker serves them.
		{50, "DescribeUserScramCredentials", func(e *aclEnv) kmsg.Request { return kmsg.NewPtrDescribeUserSCRAMCredentialsRequest() },
			kerr.ClusterAuthorizationFailed.Code},
		{51, "AlterUserScramCredentials", func(e *aclEnv) kmsg.Request {
			r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
			d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
			d.Name, d.Mechanism = "dave", 1
			r.Deletions = append(r.Deletions, d)
			return r
		}, kerr.ClusterAuthorizationFailed.Code},
		{60, "DescribeCluster", func(e *aclEnv) kmsg.Request { return kmsg.NewPtrDescribeClusterRequest() }, kerr.ClusterAuthorizationFailed.Code},
	}
}

// Keys no authorization applies to: ApiVersions, and SASL's handshake and
// authentication, which come before a principal exists.
var aclExempt = map[int16]bool{18: true, 17: true, 36: true}

func request(t *testing.T, cl *kgo.Client, req kmsg.Request) kmsg.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// TestACLMatrix walks every API key the broker advertises: alice, granted what each
// needs, is served without an authorization error; bob, granted nothing, gets the
// request's *_AUTHORIZATION_FAILED code. A key without a case fails the test, so a new
// API cannot be added without deciding its authorization.
func TestACLMatrix(t *testing.T) {
	e := startACLServer(t)
	admin := kadm.NewClient(e.client(t, "admin"))
	e.grant(t, admin, kadm.NewACLs().Allow("User:alice").Topics("t").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAll))
	e.grant(t, admin, kadm.NewACLs().Allow("User:alice").Groups("g").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAll))
	e.grant(t, admin, kadm.NewACLs().Allow("User:alice").Clusters().Operations(kadm.OpAll))
	e.grant(t, admin, kadm.NewACLs().Allow("User:alice").TransactionalIDs("tx").Operations(kadm.OpDescribe, kadm.OpWrite))
	// bob is named in an ACL of every resource type, so nothing is open by default to him
	// for want of ACLs: what he gets is decided by the rules.
	alice, bob := e.client(t, "alice"), e.client(t, "bob")

	cases := aclMatrix()
	advertised := map[int16]bool{}
	for _, ak := range apiVersionsResponse(e.s, 4).ApiKeys {
		advertised[ak.ApiKey] = true
		if aclExempt[ak.ApiKey] {
			continue
		}
		if !slices.ContainsFunc(cases, func(c aclCase) bool { return c.key == ak.ApiKey }) {
			t.Errorf("API key %d (%s) is advertised but has no ACL case: decide its authorization (authz.go) and add one", ak.ApiKey, kmsg.NameForKey(ak.ApiKey))
		}
	}
	for _, c := range cases {
		if !advertised[c.key] {
			continue
		}
		if codes := codesOf(request(t, alice, c.req(e))); slices.ContainsFunc(codes, func(code int16) bool { return slices.Contains(authCodes, code) }) {
			t.Errorf("%s as alice (allowed): error codes %v include an authorization failure", c.name, codes)
		}
		codes := codesOf(request(t, bob, c.req(e)))
		if c.want != 0 && !slices.Contains(codes, c.want) {
			t.Errorf("%s as bob (no ACL): error codes %v, want %d (%s)", c.name, codes, c.want, kerr.ErrorForCode(c.want))
		}
		if c.want == 0 && slices.ContainsFunc(codes, func(code int16) bool { return slices.Contains(authCodes, code) }) {
			t.Errorf("%s as bob: error codes %v, want none", c.name, codes)
		}
	}

	// ListGroups answers bob without the group alice committed to.
	names := func(cl *kgo.Client) []string {
		var out []string
		for _, g := range request(t, cl, kmsg.NewPtrListGroupsRequest()).(*kmsg.ListGroupsResponse).Groups {
			out = append(out, g.Group)
		}
		return out
	}
	if got := names(alice); !slices.Contains(got, "g") {
		t.Errorf("alice's ListGroups %v lacks g", got)
	}
	if got := names(bob); len(got) != 0 {
		t.Errorf("bob's ListGroups %v, want none", got)
	}
	// The topic alice created exists; the one she deleted is gone; bob changed nothing.
	v := e.meta.View()
	if v.Topics["t-new"] == nil || v.Topics["t-del"] != nil || len(v.Topics["t-alter"].Partitions) != 3 {
		t.Errorf("topics after the matrix: t-new %v, t-del %v, t-alter partitions %d", v.Topics["t-new"] != nil, v.Topics["t-del"] != nil, len(v.Topics["t-alter"].Partitions))
	}
}

// TestACLMetadataHidesTopics: Metadata lists only the topics a principal may describe.
func TestACLMetadataHidesTopics(t *testing.T) {
	e := startACLServer(t)
	admin := kadm.NewClient(e.client(t, "admin"))
	e.grant(t, admin, kadm.NewACLs().Allow("User:carol").Topics("t").Operations(kadm.OpDescribe))
	e.grant(t, admin, kadm.NewACLs().Allow("User:dave").Topics("t-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead))
	e.grant(t, admin, kadm.NewACLs().Deny("User:dave").Topics("t-alter").Operations(kadm.OpDescribe))
	list := func(user string) []string {
		resp := request(t, e.client(t, user), kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
		var out []string
		for _, mt := range resp.Topics {
			out = append(out, *mt.Topic)
		}
		sort.Strings(out)
		return out
	}
	for user, want := range map[string][]string{
		"admin": {"other", "t", "t-alter", "t-del"},
		"carol": {"t"},
		"dave":  {"t-del"}, // Read on t-* implies Describe; the deny hides t-alter
		"bob":   nil,
	} {
		if got := list(user); !slices.Equal(got, want) {
			t.Errorf("%s sees topics %v, want %v", user, got, want)
		}
	}
}

// TestACLClients: real clients over mutual TLS: alice produces and consumes in a group;
// bob cannot; carol (Describe only) sees the topic but may not write; deleting alice's
// ACL with kadm takes her access away at once.
func TestACLClients(t *testing.T) {
	e := startACLServer(t)
	admin := kadm.NewClient(e.client(t, "admin"))
	e.grant(t, admin, kadm.NewACLs().Allow("User:alice").Topics("t").Operations(kadm.OpWrite, kadm.OpRead))
	e.grant(t, admin, kadm.NewACLs().Allow("User:alice").Groups("g").Operations(kadm.OpRead))
	e.grant(t, admin, kadm.NewACLs().Allow("User:carol").Topics("t").Operations(kadm.OpDescribe))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	alice := e.client(t, "alice", kgo.DefaultProduceTopic("t"))
	if err := alice.ProduceSync(ctx, kgo.StringRecord("hello")).FirstErr(); err != nil {
		t.Fatalf("alice's produce: %v", err)
	}
	for _, user := range []string{"bob", "carol"} {
		cl := e.client(t, user, kgo.DefaultProduceTopic("t"), kgo.DisableIdempotentWrite())
		if err := cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("%s's produce: %v, want TOPIC_AUTHORIZATION_FAILED", user, err)
		}
	}
	// An idempotent producer without Write on any topic is refused its producer ID
	// (KIP-679): carol may only describe.
	carol := e.client(t, "carol", kgo.DefaultProduceTopic("t"))
	if err := carol.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("carol's idempotent produce: %v, want CLUSTER_AUTHORIZATION_FAILED (InitProducerId)", err)
	}
	// A group consumer: FindCoordinator, JoinGroup, SyncGroup, OffsetFetch, Fetch, all
	// allowed to alice (the fake backend has no coordinator partition, so the group
	// cannot form; the refusal would be GROUP_AUTHORIZATION_FAILED were it denied).
	adm := kadm.NewClient(alice)
	if _, err := adm.FetchOffsets(ctx, "g"); err != nil && errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Errorf("alice's offset fetch: %v", err)
	}
	if _, err := kadm.NewClient(e.client(t, "bob")).FetchOffsets(ctx, "g"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Errorf("bob's offset fetch: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	described, err := admin.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Deny().DenyHosts().Operations().ResourcePatternType(kadm.ACLPatternAny))
	if err != nil || len(described) != 1 || described[0].Err != nil || len(described[0].Described) != 4 {
		t.Fatalf("DescribeACLs: %+v %v", described, err)
	}
	deleted, err := admin.DeleteACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("t").Operations(kadm.OpWrite))
	if err != nil || len(deleted) != 1 || len(deleted[0].Deleted) != 1 {
		t.Fatalf("DeleteACLs: %+v %v", deleted, err)
	}
	if err := alice.ProduceSync(ctx, kgo.StringRecord("again")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("alice's produce after her Write ACL was deleted: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	// Not a super user: bob may not manage ACLs.
	if _, err := kadm.NewClient(e.client(t, "bob")).CreateACLs(ctx, kadm.NewACLs().Allow("User:bob").Topics("t").Operations(kadm.OpAll)); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		res, _ := kadm.NewClient(e.client(t, "bob")).CreateACLs(ctx, kadm.NewACLs().Allow("User:bob").Topics("t").Operations(kadm.OpAll))
		if len(res) == 0 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
			t.Errorf("bob's CreateACLs: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, res)
		}
	}
}

// TestACLKcat: librdkafka over SSL with a client certificate: kcat's metadata listing
// shows alice the topic and not bob, and bob's produce fails.
func TestACLKcat(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat not installed")
	}
	e := startACLServer(t)
	admin := kadm.NewClient(e.client(t, "admin"))
	e.grant(t, admin, kadm.NewACLs().Allow("User:alice").Topics("t").Operations(kadm.OpWrite))
	kcat := func(user string, stdin string, args ...string) (string, error) {
		p := e.cert(t, user)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "kcat", append([]string{"-b", e.addr, "-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + e.ca.CAFile,
			"-X", "ssl.certificate.location=" + p.CertFile, "-X", "ssl.key.location=" + p.KeyFile, "-X", "message.timeout.ms=5000"}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := kcat("alice", "", "-L")
	if err != nil || !strings.Contains(out, `topic "t" with 2 partitions`) {
		t.Fatalf("alice's kcat -L: %v\n%s", err, out)
	}
	out, err = kcat("bob", "", "-L")
	if err != nil || strings.Contains(out, `topic "t"`) || !strings.Contains(out, "0 topics") {
		t.Fatalf("bob's kcat -L: %v\n%s", err, out)
	}
	if out, err := kcat("alice", "a\n", "-P", "-t", "t"); err != nil {
		t.Fatalf("alice's kcat -P: %v\n%s", err, out)
	}
	out, err = kcat("bob", "b\n", "-P", "-t", "t")
	if err == nil || !strings.Contains(strings.ToLower(out), "authoriz") {
		t.Fatalf("bob's kcat -P: %v, want an authorization failure\n%s", err, out)
	}
	t.Logf("bob's kcat -P: %s", strings.TrimSpace(out))
}

// TestACLGroupTopics: in a group the principal may use, a commit to a topic it may not
// read is refused for that topic only, and an all-topics offset fetch leaves it out.
func TestACLGroupTopics(t *testing.T) {
	e := startACLServer(t)
	admin := kadm.NewClient(e.client(t, "admin"))
	e.grant(t, admin, kadm.NewACLs().Allow("User:erin").Groups("g").Operations(kadm.OpRead))
	e.grant(t, admin, kadm.NewACLs().Allow("User:erin").Topics("t").Operations(kadm.OpRead))
	erin := e.client(t, "erin")
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "g", -1
	for _, tp := range []string{"t", "other"} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = tp
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 7
		rt.Partitions = append(rt.Partitions, rp)
		commit.Topics = append(commit.Topics, rt)
	}
	got := map[string]int16{}
	for _, rt := range request(t, erin, commit).(*kmsg.OffsetCommitResponse).Topics {
		got[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	if got["t"] != 0 || got["other"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("commit codes %v: want t 0, other TOPIC_AUTHORIZATION_FAILED", got)
	}
	// The admin commits to other too; erin's fetch of all the group's offsets sees t only.
	commit.Topics = commit.Topics[1:]
	if codes := codesOf(request(t, e.client(t, "admin"), commit)); slices.ContainsFunc(codes, func(c int16) bool { return c != 0 }) {
		t.Fatalf("admin's commit: %v", codes)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = "g"
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = "g"
	fetch.Groups = append(fetch.Groups, rg)
	resp := request(t, erin, fetch).(*kmsg.OffsetFetchResponse)
	var topics []string
	for _, rt := range resp.Topics {
		topics = append(topics, rt.Topic)
	}
	for _, g := range resp.Groups {
		for _, rt := range g.Topics {
			topics = append(topics, rt.Topic)
		}
	}
	if !slices.Equal(topics, []string{"t"}) {
		t.Fatalf("erin's offset fetch lists %v, want [t]", topics)
	}
}

// TestACLAutoCreate: Metadata creates a missing topic only for a principal with Create
// on the cluster or the topic; the others get TOPIC_AUTHORIZATION_FAILED and nothing is
// created.
func TestACLAutoCreate(t *testing.T) {
	e := startACLServer(t, func(c *Config) { c.AutoCreateTopics = true })
	admin := kadm.NewClient(e.client(t, "admin"))
	e.grant(t, admin, kadm.NewACLs().Allow("User:carol").Topics("auto-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpDescribe))
	e.grant(t, admin, kadm.NewACLs().Allow("User:frank").Topics("auto-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpCreate, kadm.OpDescribe))
	ask := func(user, topic string) int16 {
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = true
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = &topic
		req.Topics = append(req.Topics, mt)
		return request(t, e.client(t, user), req).(*kmsg.MetadataResponse).Topics[0].ErrorCode
	}
	if code := ask("carol", "auto-a"); code != kerr.TopicAuthorizationFailed.Code || e.meta.View().Topics["auto-a"] != nil {
		t.Errorf("carol (Describe only): code %d, topic created %v", code, e.meta.View().Topics["auto-a"] != nil)
	}
	if code := ask("frank", "auto-b"); code != 0 || e.meta.View().Topics["auto-b"] == nil {
		t.Errorf("frank (Create): code %d, topic created %v", code, e.meta.View().Topics["auto-b"] != nil)
	}
}

// TestACLOff: without an authorizer everyone is served and the ACL APIs answer
// SECURITY_DISABLED, as Kafka does without an authorizer.
func TestACLOff(t *testing.T) {
	e := startACLServer(t, func(c *Config) { c.Authorizer = nil })
	bob := e.client(t, "bob")
	for _, c := range aclMatrix() {
		if _, served := apis[c.key]; !served {
			continue
		}
		if c.key < 29 || c.key > 31 {
			if codes := codesOf(request(t, bob, c.req(e))); slices.ContainsFunc(codes, func(code int16) bool { return slices.Contains(authCodes, code) }) {
				t.Errorf("%s with the authorizer off: %v", c.name, codes)
			}
			continue
		}
		if codes := codesOf(request(t, bob, c.req(e))); !slices.Contains(codes, kerr.SecurityDisabled.Code) {
			t.Errorf("%s with the authorizer off: %v, want SECURITY_DISABLED", c.name, codes)
		}
	}
}
