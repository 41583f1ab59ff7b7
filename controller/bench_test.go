package controller

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

// BenchmarkLeaderFailover measures the time from killing the controller leader to the
// next successful CreateTopics through a client that was talking to that leader. After
// each kill the dead controller is restarted (untimed), so every round has a full quorum.
func BenchmarkLeaderFailover(b *testing.B) {
	tc := newTestCluster(b, 3, nil)
	tc.waitLeader()
	tc.broker(1, "a")
	ctx := ctxT(b)
	var times []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		leader := tc.waitLeader()
		admin := tc.client(-1, nil, tc.leaderFirst(leader)...) // talking to the leader
		if _, err := admin.CreateTopic(ctx, metadata.TopicSpec{Name: fmt.Sprintf("warm-%d", i), Partitions: 1, ReplicationFactor: -1}, false); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		tc.stop(leader)
		if _, err := admin.CreateTopic(ctx, metadata.TopicSpec{Name: fmt.Sprintf("failover-%d", i), Partitions: 1, ReplicationFactor: -1}, false); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		b.StopTimer()
		times = append(times, d)
		tc.restart(leader)
		newLeader := tc.waitLeader()
		want := tc.ctrls[newLeader].View().Version
		testutil.Eventually(b, 30*time.Second, "the restarted controller to catch up", func() bool { return tc.ctrls[leader].View().Version >= want })
		b.StartTimer()
	}
	b.StopTimer()
	reportDurations(b, "failover", times)
}

// BenchmarkMetadataPropagation measures the time from a CreateTopic sent to the leader
// until a client watching a follower has it in its View, with 100, 1,000 and 10,000
// partitions in the cluster (every change ships the whole View).
func BenchmarkMetadataPropagation(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			tc := newTestCluster(b, 3, nil)
			leader := tc.waitLeader()
			ctx := ctxT(b)
			tc.broker(1, "a")
			tc.broker(2, "b")
			tc.broker(3, "c")
			writer := tc.client(-1, nil, leader)
			watcher := tc.client(-1, nil, tc.follower(leader))
			if _, err := writer.CreateTopic(ctx, metadata.TopicSpec{Name: "base", Partitions: int32(n), ReplicationFactor: -1}, false); err != nil {
				b.Fatal(err)
			}
			testutil.Eventually(b, 60*time.Second, "the watcher to see the base topic", func() bool { return watcher.View().Topics["base"] != nil })
			hc := &http.Client{Timeout: 30 * time.Second}
			url := "http://" + tc.peers[leader].APIAddr + "/v1/topics"
			var times []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				name := fmt.Sprintf("prop-%d", i)
				body, _ := json.Marshal(ctlwire.CreateTopicRequest{Name: name, Partitions: 1, ReplicationFactor: -1})
				start := time.Now()
				resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("create: HTTP %d", resp.StatusCode)
				}
				for ch := watcher.Changed(); watcher.View().Topics[name] == nil; ch = watcher.Changed() {
					select {
					case <-ch:
					case <-time.After(60 * time.Second):
						b.Fatal("the watcher never saw the topic")
					}
				}
				times = append(times, time.Since(start))
			}
			b.StopTimer()
			reportDurations(b, "propagation", times)
		})
	}
}

func reportDurations(b *testing.B, what string, times []time.Duration) {
	if len(times) == 0 {
		return
	}
	sorted := append([]time.Duration(nil), times...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	var sum time.Duration
	for _, d := range times {
		sum += d
	}
	mean := sum / time.Duration(len(times))
	b.ReportMetric(float64(mean.Microseconds())/1000, "ms/"+what)
	b.ReportMetric(float64(sorted[len(sorted)-1].Microseconds())/1000, "max-ms/"+what)
	b.Logf("%s over %d rounds: mean %v, min %v, max %v (all: %v)", what, len(times), mean.Round(time.Millisecond), sorted[0].Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond), roundAll(times))
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Microsecond)
	}
	return out
}
