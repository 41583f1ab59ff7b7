package cluster

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/internal/testutil"
)

// shareConfigCluster is a share cluster with Kafka's default 30 s acquisition lock (so
// a release well before it shows), group lock durations allowed down to 1 s, and
// transactions on.
func shareConfigCluster(t *testing.T) *Cluster {
	return startShareCluster(t, func(b *broker.Config) {
		b.Share.LockDuration = broker.DefaultConfig().Share.LockDuration
		b.Share.MinLockDuration = time.Second
		b.Transactions = true
		b.Txn.Partitions = 3
	})
}

// alterGroupConfigs sets (value non-nil) or deletes share group configs through
// IncrementalAlterConfigs on resource type GROUP (kadm has no call for it); it returns
// the resource's code and message.
func alterGroupConfigs(t *testing.T, cl *kgo.Client, group string, set map[string]*string) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	names := make([]string, 0, len(set))
	for k := range set {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = k, set[k], kmsg.IncrementalAlterConfigOpSet
		if set[k] == nil {
			c.Op = kmsg.IncrementalAlterConfigOpDelete
		}
		r.Configs = append(r.Configs, c)
	}
	req.Resources = []kmsg.IncrementalAlterConfigsRequestResource{r}
	var code int16
	msg := ""
	testutil.Eventually(t, 30*time.Second, "IncrementalAlterConfigs of group "+group, func() bool {
		resp, err := req.RequestWith(ctxFor(t, 10*time.Second), cl)
		if err != nil || len(resp.Resources) != 1 {
			t.Logf("IncrementalAlterConfigs %s: %v", group, err)
			return false
		}
		code, msg = resp.Resources[0].ErrorCode, ""
		if m := resp.Resources[0].ErrorMessage; m != nil {
			msg = *m
		}
		return !kerr.IsRetriable(kerr.ErrorForCode(code)) // the state topic being created or moved
	})
	return code, msg
}

// groupConfigs describes group's configs: name → config.
func groupConfigs(t *testing.T, cl *kgo.Client, group string) map[string]kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	req.Resources = []kmsg.DescribeConfigsRequestResource{r}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	testutil.EventuallyNoError(t, 30*time.Second, "DescribeConfigs of group "+group, func() error {
		resp, err := req.RequestWith(ctxFor(t, 10*time.Second), cl)
		switch {
		case err != nil:
			return err
		case len(resp.Resources) != 1:
			return fmt.Errorf("%d resources", len(resp.Resources))
		case resp.Resources[0].ErrorCode != 0:
			return kerr.ErrorForCode(resp.Resources[0].ErrorCode)
		}
		for _, c := range resp.Resources[0].Configs {
			out[c.Name] = c
		}
		return nil
	})
	return out
}

func strp(s string) *string { return &s }

// shareValues runs a franz-go share consumer of group on topic until it has read want
// distinct values and then a quiet second more; it returns value → last delivery count.
func shareValues(t *testing.T, c *Cluster, name, group, topic string, want int) map[string]int32 {
	t.Helper()
	s := &shareSeen{count: map[string]int{}, dc: map[string]int32{}, by: map[string]map[string]bool{}}
	cl := startShareConsumer(t, c, name, group, topic, s)
	defer cl.Close()
	testutil.Eventually(t, 60*time.Second, fmt.Sprintf("%s reads %d records", name, want), func() bool {
		n, _ := s.n()
		return n >= want
	})
	time.Sleep(time.Second) // why: a record that must not be delivered would show by now
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int32, len(s.dc))
	for v, d := range s.dc {
		out[v] = d
	}
	return out
}

// Issue 26, share groups: the per-group configs of Kafka 4.2 (GroupConfig), through
// DescribeConfigs and IncrementalAlterConfigs on the GROUP resource: validated against
// the broker's bounds, and applied by the share partitions — the group's lock duration
// (records a member holds come back after it, not the broker's 30 s), its
// share.auto.offset.reset by_duration (records older than the duration never
// delivered), its share.isolation.level read_committed (neither aborted nor open
// transactions' records delivered; a read_uncommitted group gets them).
func TestShareGroupConfigs(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	if testing.Short() {
		t.Skip("a cluster test")
	}
	c := shareConfigCluster(t)
	raw := newClient(t, c)
	adm := kadm.NewClient(raw)

	// Defaults, and refusals that change nothing.
	const group = "sg-lock"
	d := groupConfigs(t, raw, group)
	if v := d["share.record.lock.duration.ms"]; v.Value == nil || *v.Value != "30000" || v.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("default lock duration %+v", v)
	}
	if v := d["share.isolation.level"]; v.Value == nil || *v.Value != "read_uncommitted" {
		t.Fatalf("default isolation level %+v", v)
	}
	for _, bad := range []map[string]*string{
		{"share.record.lock.duration.ms": strp("500")},    // below the bound
		{"share.record.lock.duration.ms": strp("120000")}, // above group.share.max.record.lock.duration.ms
		{"share.session.timeout.ms": strp("1000")},        // below the bound
		{"share.auto.offset.reset": strp("newest")},
		{"share.isolation.level": strp("read_committed"), "consumer.session.timeout.ms": strp("45000")},
	} {
		if code, msg := alterGroupConfigs(t, raw, group, bad); code != kerr.InvalidConfig.Code {
			t.Fatalf("%v: code %d (%s), want INVALID_CONFIG", bad, code, msg)
		}
	}
	if v := groupConfigs(t, raw, group)["share.isolation.level"]; *v.Value != "read_uncommitted" {
		t.Fatalf("a refused alter changed the isolation level: %s", *v.Value)
	}
	if code, msg := alterGroupConfigs(t, raw, group, map[string]*string{"share.record.lock.duration.ms": strp("2000")}); code != 0 {
		t.Fatalf("setting the lock duration: %d %s", code, msg)
	}
	if v := groupConfigs(t, raw, group)["share.record.lock.duration.ms"]; *v.Value != "2000" || v.Source != kmsg.ConfigSourceGroupConfig {
		t.Fatalf("lock duration after the alter: %+v", v)
	}

	// The group's 2 s lock: what a member holds comes back to another within seconds.
	if err := createTopic(t, adm, 1, "cfgq"); err != nil {
		t.Fatal(err)
	}
	prod := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produceValues(t, prod, "cfgq", 1, 10, "l")
	md, err := adm.Metadata(ctxFor(t, 10*time.Second), "cfgq")
	if err != nil {
		t.Fatal(err)
	}
	held, _, _ := rawShareMember(t, raw, group, "holder", "cfgq", 0, md.Topics["cfgq"].Partitions[0].Leader, 10)
	acquired := time.Now()
	got := shareValues(t, c, "c-lock", group, "cfgq", 10)
	if took := time.Since(acquired); took > 15*time.Second {
		t.Fatalf("records held under a 2 s group lock came back after %v (the broker's lock is 30 s)", took)
	}
	for v := range held {
		if got[v] != 2 {
			t.Errorf("record %s redelivered with count %d, want 2", v, got[v])
		}
	}

	// by_duration: a new share partition starts at the first record of the last hour.
	if err := createTopic(t, adm, 1, "durq"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		old := &kgo.Record{Topic: "durq", Value: []byte(fmt.Sprintf("old-%d", i)), Timestamp: time.Now().Add(-2 * time.Hour)}
		if err := prod.ProduceSync(ctxFor(t, 30*time.Second), old).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produceValues(t, prod, "durq", 1, 5, "new")
	if code, msg := alterGroupConfigs(t, raw, "sg-dur", map[string]*string{"share.auto.offset.reset": strp("by_duration:PT1H")}); code != 0 {
		t.Fatalf("setting by_duration: %d %s", code, msg)
	}
	for v := range shareValues(t, c, "c-dur", "sg-dur", "durq", 5) {
		if !strings.HasPrefix(v, "new") {
			t.Errorf("record %s, older than the group's by_duration, delivered", v)
		}
	}

	// read_committed: committed records only, an open transaction's once it commits.
	if err := createTopic(t, adm, 1, "txq"); err != nil {
		t.Fatal(err)
	}
	tx := newClient(t, c, kgo.TransactionalID("share-rc"), kgo.DefaultProduceTopic("txq"))
	txn := func(prefix string, end *kgo.TransactionEndTry) {
		if err := tx.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 5; i++ {
			if err := tx.ProduceSync(ctxFor(t, 30*time.Second), kgo.StringRecord(fmt.Sprintf("%s-%d", prefix, i))).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if end != nil {
			if err := tx.EndTransaction(ctxFor(t, 30*time.Second), *end); err != nil {
				t.Fatal(err)
			}
		}
	}
	commit, abort := kgo.TryCommit, kgo.TryAbort
	txn("committed", &commit)
	txn("aborted", &abort)
	txn("open", nil)
	if code, msg := alterGroupConfigs(t, raw, "sg-rc", map[string]*string{"share.isolation.level": strp("read_committed")}); code != 0 {
		t.Fatalf("setting read_committed: %d %s", code, msg)
	}
	prefixes := func(m map[string]int32) map[string]int {
		out := map[string]int{}
		for v := range m {
			out[v[:len(v)-2]]++
		}
		return out
	}
	if p := prefixes(shareValues(t, c, "c-ru", "sg-ru", "txq", 15)); p["committed"] != 5 || p["aborted"] != 5 || p["open"] != 5 {
		t.Fatalf("read_uncommitted group read %v, want every record", p)
	}
	s := &shareSeen{count: map[string]int{}, dc: map[string]int32{}, by: map[string]map[string]bool{}}
	rc := startShareConsumer(t, c, "c-rc", "sg-rc", "txq", s)
	defer rc.Close()
	testutil.Eventually(t, 60*time.Second, "the committed records read_committed", func() bool {
		n, _ := s.n()
		return n >= 5
	})
	time.Sleep(2 * time.Second) // why: an aborted or open transaction's record would be delivered by now
	s.mu.Lock()
	p := map[string]int{}
	for v := range s.count {
		p[v[:len(v)-2]]++
	}
	s.mu.Unlock()
	if p["committed"] != 5 || p["aborted"] != 0 || p["open"] != 0 {
		t.Fatalf("read_committed group read %v before the open transaction ended, want only the 5 committed", p)
	}
	if err := tx.EndTransaction(ctxFor(t, 30*time.Second), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 60*time.Second, "the open transaction's records once committed", func() bool {
		n, _ := s.n()
		return n >= 10
	})
	time.Sleep(time.Second) // why: an aborted record would be delivered by now
	s.mu.Lock()
	defer s.mu.Unlock()
	for v := range s.count {
		if strings.HasPrefix(v, "aborted") {
			t.Errorf("aborted record %s delivered to a read_committed group", v)
		}
	}
}

// Issue 26, share groups: records a member acquired are released when its connection
// closes (Kafka's share session cache), not when their 30 s locks run out: another
// member gets them, with delivery count 2, within seconds.
func TestShareReleaseOnConnectionClose(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	if testing.Short() {
		t.Skip("a cluster test")
	}
	c := shareConfigCluster(t)
	raw := newClient(t, c)
	adm := kadm.NewClient(raw)
	const topic, group = "closeq", "sg-close"
	if err := createTopic(t, adm, 1, topic); err != nil {
		t.Fatal(err)
	}
	prod := newClient(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produceValues(t, prod, topic, 1, 20, "r")
	md, err := adm.Metadata(ctxFor(t, 10*time.Second), topic)
	if err != nil {
		t.Fatal(err)
	}
	zombie, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	held, _, _ := rawShareMember(t, zombie, group, "zombie", topic, 0, md.Topics[topic].Partitions[0].Leader, 20)
	zombie.Close() // its connections close; the member never leaves the group
	closed := time.Now()
	got := shareValues(t, c, "c-after", group, topic, 20)
	if took := time.Since(closed); took > 15*time.Second {
		t.Fatalf("records of a closed connection came back after %v: not released (the lock is 30 s)", took)
	}
	for v := range held {
		if got[v] != 2 {
			t.Errorf("record %s redelivered with count %d, want 2", v, got[v])
		}
	}
}

// Issue 26, share groups: after its __consumer_offsets partition moves (and every
// __share_group_state partition with it), the new coordinator lists the share group
// (type "share") before any member heartbeats or anyone describes it, and its configs
// are still there.
func TestShareGroupListedAfterCoordinatorMove(t *testing.T) {
	t.Parallel() // waits more than it works: see cluster_test.go, "Parallel tests"
	if testing.Short() {
		t.Skip("a cluster test")
	}
	c := startShareCluster(t)
	raw := newClient(t, c)
	adm := kadm.NewClient(raw)
	const topic, group = "lqueue", "sg-listed"
	if err := createTopic(t, adm, 1, topic); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "a member joins", func() bool {
		resp, err := shareHeartbeat(t, raw, group, "m", topic, 0)
		return err == nil && resp.ErrorCode == 0
	})
	if resp, err := shareHeartbeat(t, raw, group, "m", topic, -1); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("the member leaving: %v %+v", err, resp)
	}
	if code, msg := alterGroupConfigs(t, raw, group, map[string]*string{"share.record.lock.duration.ms": strp("20000")}); code != 0 {
		t.Fatalf("setting the lock duration: %d %s", code, msg)
	}
	from := findCoordinator(t, adm, group)
	to := from%3 + 1
	moveCoordinator(t, c, adm, group, to)
	state := c.Broker(0).Client.View().Topics["__share_group_state"]
	if state == nil {
		t.Fatal("no __share_group_state")
	}
	for i, p := range state.Partitions {
		movePartition(t, c, 1, state, int32(i), p.Leader%3+1)
	}

	var by int32 = -1
	testutil.EventuallyNoError(t, 30*time.Second, "the new coordinator lists the share group", func() error {
		req := kmsg.NewPtrListGroupsRequest()
		req.TypesFilter = []string{"share"}
		for _, sh := range raw.RequestSharded(ctxFor(t, 10*time.Second), req) {
			if sh.Err != nil {
				return sh.Err
			}
			for _, g := range sh.Resp.(*kmsg.ListGroupsResponse).Groups {
				if g.Group == group && g.GroupType == "share" && g.GroupState == "Empty" {
					by = sh.Meta.NodeID
					return nil
				}
			}
		}
		return fmt.Errorf("%s not listed", group)
	})
	if by != to {
		t.Fatalf("listed by broker %d, the coordinator is %d", by, to)
	}
	if v := groupConfigs(t, raw, group)["share.record.lock.duration.ms"]; *v.Value != "20000" {
		t.Fatalf("the group's lock duration after the moves: %s", *v.Value)
	}
}
