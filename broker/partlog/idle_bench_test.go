package partlog

import (
	"runtime"
	"testing"

	"github.com/weir-io/weir/metadata"
)

// BenchmarkIdlePartitionBytes reports the broker-side heap of one idle partition: the
// Partition as syncPartitions makes it (New, UseOwn, Apply of its metadata) in the Set.
//
//	go test -run '^$' -bench IdlePartitionBytes ./broker/partlog
func BenchmarkIdlePartitionBytes(b *testing.B) {
	const n = 10000
	for range b.N {
		v := metadata.NewView(1, "c", 1, nil, nil)
		s := NewSet()
		var ms0, ms1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms0)
		s.Update(func(tx SetTx) {
			for i := range int32(n) {
				p := New("t", metadata.TopicID{1}, i, 0, 0)
				p.UseOwn(nil, SourceID{Broker: 1, Epoch: 1})
				p.Apply(metadata.Partition{Index: i, Leader: 1, Logs: []metadata.LogRange{{Broker: 1}}}, v, true)
				tx.Put(p)
			}
		})
		runtime.GC()
		runtime.ReadMemStats(&ms1)
		b.ReportMetric(float64(ms1.HeapAlloc-ms0.HeapAlloc)/n, "B/partition")
		runtime.KeepAlive(s)
	}
}
