package cluster

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/internal/testutil"
)

// sessionRequests sums weir_broker_fetch_session_requests_total{kind} over the brokers.
func sessionRequests(t *testing.T, reg *prometheus.Registry, kind string) float64 {
	t.Helper()
	return counterSum(t, reg, "weir_broker_fetch_session_requests_total", func(l map[string]string) bool { return l["kind"] == kind })
}

// seenRecords is what a consumer read: value → topic/partition/offset, and every value
// read more than once.
type seenRecords struct {
	mu   sync.Mutex
	at   map[string]string
	dups []string
}

func (s *seenRecords) add(r *kgo.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	where := fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Offset)
	if prev, ok := s.at[string(r.Value)]; ok {
		s.dups = append(s.dups, fmt.Sprintf("%s at %s and %s", r.Value, prev, where))
	}
	s.at[string(r.Value)] = where
}

// missing counts the acked records not read yet.
func (s *seenRecords) missing(acked map[string]int64) (missing int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for v := range acked {
		if _, ok := s.at[v]; !ok {
			missing++
		}
	}
	return missing
}

// A franz-go consumer of many partitions on a 3-broker cluster uses incremental fetch
// sessions (KIP-227: it keeps one per broker; a fetch names only the partitions whose
// offset moved, the answer only those with news) and reads every record exactly once,
// at its acked offset, across a graceful leader change of two partitions (their
// sessions on the old leader lose them, the new leader's gain them) and the deletion of
// another topic it consumes (its partitions answered UNKNOWN_TOPIC_ID in the sessions
// until the client forgets them).
func TestFetchSessionsConsumer(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster test")
	}
	reg := prometheus.NewRegistry()
	c := startCluster(t, func(cfg *Config) {
		noBalancer(cfg)
		cfg.Registerer = reg
	})
	pcl := newClient(t, c)
	adm := kadm.NewClient(pcl)
	const parts, doomedParts = 48, 8
	for topic, n := range map[string]int32{"sess": parts, "doomed": doomedParts} {
		if err := createTopic(t, adm, n, topic); err != nil {
			t.Fatal(err)
		}
	}
	sess := waitTopic(t, c, "sess")
	waitTopic(t, c, "doomed")
	acked := produceValues(t, pcl, "sess", parts, 3, "r1")
	ackedDoomed := produceValues(t, pcl, "doomed", doomedParts, 3, "d1")

	seen := &seenRecords{at: map[string]string{}}
	ccl := newClient(t, c, kgo.ConsumeTopics("sess", "doomed"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	ctx := ctxFor(t, 5*time.Minute)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := ccl.PollFetches(ctx)
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(seen.add)
		}
	}()
	waitRead := func(what string, acked map[string]int64) {
		t.Helper()
		testutil.Eventually(t, 90*time.Second, what, func() bool { return seen.missing(acked) == 0 })
	}
	waitRead("the first records read", acked)
	waitRead("doomed's records read", ackedDoomed)
	var incStart float64
	testutil.Eventually(t, 30*time.Second, "incremental fetches", func() bool {
		incStart = sessionRequests(t, reg, "incremental")
		return incStart > 0
	})

	// Leader change: two partitions move, then more records everywhere.
	for index := int32(0); index < 2; index++ {
		from := sess.Partitions[index].Leader
		movePartition(t, c, from, sess, index, from%3+1)
	}
	r2 := produceValues(t, pcl, "sess", parts, 2, "r2")
	waitRead("records after the moves read", r2)
	// The moved partitions' new leaders may have answered them in full fetches that
	// open new sessions: the sessions are in use again once an incremental fetch follows.
	var incMoved float64
	testutil.Eventually(t, 30*time.Second, "incremental fetches after the moves", func() bool {
		incMoved = sessionRequests(t, reg, "incremental")
		return incMoved > incStart
	})

	// Topic deletion: the consumer keeps reading the other topic.
	if _, err := adm.DeleteTopic(ctxFor(t, 30*time.Second), "doomed"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "doomed gone from every broker's view", func() bool {
		for i := range c.brokers {
			if n := c.Broker(i); n != nil && n.Client.View().Topics["doomed"] != nil {
				return false
			}
		}
		return true
	})
	r3 := produceValues(t, pcl, "sess", parts, 2, "r3")
	waitRead("records after the deletion read", r3)
	// Idle: every fetch of a second is incremental (about 5 long polls of 200 ms per
	// broker), none full. The deletion's metadata reaches the consumer in its own time
	// (a session dropping the deleted partitions may be reopened with a full fetch), so
	// the second is measured again until one is idle, for at most 30 s; a consumer whose
	// sessions never settle fails.
	var incEnd float64
	var lastIdle string
	testutil.Eventually(t, 30*time.Second, "an idle second of incremental fetches only", func() bool {
		fullIdle, incIdle := sessionRequests(t, reg, "full"), sessionRequests(t, reg, "incremental")
		time.Sleep(time.Second) // on purpose: the window the consumer's idle long polls fall in
		incEnd = sessionRequests(t, reg, "incremental")
		full := sessionRequests(t, reg, "full")
		lastIdle = fmt.Sprintf("%v full and %v incremental fetches", full-fullIdle, incEnd-incIdle)
		return full == fullIdle && incEnd-incIdle >= 6
	})
	t.Logf("idle second: %s", lastIdle)

	ccl.Close()
	<-done
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if len(seen.dups) > 0 {
		t.Fatalf("%d records read twice, e.g. %s", len(seen.dups), seen.dups[0])
	}
	for _, set := range []map[string]int64{acked, r2, r3} {
		for v, off := range set {
			p := seen.at[v]
			if want := fmt.Sprintf("@%d", off); len(p) < len(want) || p[len(p)-len(want):] != want {
				t.Fatalf("%s read at %s, acked at offset %d", v, p, off)
			}
		}
	}
	full := sessionRequests(t, reg, "full")
	t.Logf("fetches: %v full, %v incremental (%v before the moves, %v before the deletion), %v sessionless",
		full, incEnd, incStart, incMoved, sessionRequests(t, reg, "sessionless"))
	if incStart == 0 || incMoved <= incStart || incEnd <= incMoved {
		t.Fatalf("incremental fetches %v, %v, %v: want some in each phase", incStart, incMoved, incEnd)
	}
}
