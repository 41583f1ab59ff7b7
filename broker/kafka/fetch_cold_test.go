package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// coldPart is a partition Reader over in-memory batches whose reads are slow, like a
// read from object storage, and which records how many of its kind read at once.
type coldPart struct {
	fakePart
	id      byte
	batches [][]byte // batch i holds offset i
	cold    bool
	delay   time.Duration
	stats   *readStats
}

type readStats struct {
	inFlight, peak atomic.Int32
	mu             sync.Mutex
	limits         map[byte]int // the limit each partition was read with
}

// coldBatch is a record batch frame: base offset, length, then a body naming its
// partition (only the frame is parsed by the fetch).
func coldBatch(part byte, offset int64, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b, uint64(offset))
	binary.BigEndian.PutUint32(b[8:], uint32(size-12))
	for i := 12; i < size; i++ {
		b[i] = part
	}
	return b
}

func (p *coldPart) Cold(int64) bool { return p.cold }

func (p *coldPart) LastStable() int64 { return int64(len(p.batches)) }

// Read follows the Reader contract: whole batches from offset while they fit in maxBytes,
// at least one when first.
func (p *coldPart) Read(ctx context.Context, offset int64, maxBytes int, first bool, epoch int32) ([]byte, int64, int64, error) {
	if n := p.stats.inFlight.Add(1); n > p.stats.peak.Load() {
		p.stats.peak.Store(n) // racy max, good enough: only growth matters
	}
	defer p.stats.inFlight.Add(-1)
	p.stats.mu.Lock()
	p.stats.limits[p.id] = maxBytes
	p.stats.mu.Unlock()
	if p.cold {
		time.Sleep(p.delay) // on purpose: a cold read's injected latency
	}
	var out []byte
	for i := offset; i < int64(len(p.batches)); i++ {
		b := p.batches[i]
		if len(out)+len(b) > maxBytes && !(first && len(out) == 0) {
			break
		}
		out = append(out, b...)
	}
	hw := int64(len(p.batches))
	return out, hw, 0, nil
}

// sequentialFetch is the reference: fillFetch as it was, one partition after another.
func sequentialFetch(parts []*coldPart, offsets []int64, partMax []int, maxBytes int) [][]byte {
	out := make([][]byte, len(parts))
	total := 0
	for i, p := range parts {
		limit := max(0, min(partMax[i], maxBytes-total))
		var buf []byte
		for k := offsets[i]; k < int64(len(p.batches)); k++ {
			b := p.batches[k]
			if len(buf)+len(b) > limit && !(total == 0 && len(buf) == 0) {
				break
			}
			buf = append(buf, b...)
		}
		out[i] = buf
		total += len(buf)
	}
	return out
}

func coldTargets(parts []*coldPart, offsets []int64, partMax []int) []fetchTarget {
	var ts []fetchTarget
	for i, p := range parts {
		req := kmsg.NewFetchRequestTopicPartition()
		req.Partition, req.FetchOffset, req.PartitionMaxBytes = int32(i), offsets[i], int32(partMax[i])
		out := kmsg.NewFetchResponseTopicPartition()
		out.Partition = int32(i)
		ts = append(ts, fetchTarget{r: p, req: &req, out: &out})
	}
	return ts
}

// checkFetch asserts what any answer must satisfy: each partition's bytes are whole
// batches of that partition from its fetch offset on; in request order, a partition
// gets at most min(partition max, max bytes - what those before it got), except that
// the first partition with data may get one batch larger than that (KIP-74); and the
// fetch is not empty when the sequential fetch is not (no partition starves).
func checkFetch(t *testing.T, parts []*coldPart, offsets []int64, partMax []int, maxBytes int, ts []fetchTarget, got int) {
	t.Helper()
	total := 0
	for i, tg := range ts {
		if tg.out.Partition != int32(i) {
			t.Fatalf("answer %d is partition %d", i, tg.out.Partition)
		}
		if tg.out.RecordBatches == nil {
			t.Fatalf("partition %d: null record set", i)
		}
		data, n := tg.out.RecordBatches, 0
		for pos := 0; pos < len(data); n++ {
			k := offsets[i] + int64(n)
			if k >= int64(len(parts[i].batches)) {
				t.Fatalf("partition %d: bytes past its last batch", i)
			}
			want := parts[i].batches[k]
			if len(data)-pos < len(want) || !bytes.Equal(data[pos:pos+len(want)], want) {
				t.Fatalf("partition %d: batch %d is not the partition's batch at offset %d", i, n, k)
			}
			pos += len(want)
		}
		room := max(0, min(partMax[i], maxBytes-total))
		if len(data) > room && !(total == 0 && n == 1) {
			t.Fatalf("partition %d got %d bytes, room %d (partition max %d, max bytes %d, %d before it)", i, len(data), room, partMax[i], maxBytes, total)
		}
		total += len(data)
	}
	if total != got {
		t.Fatalf("fillFetch reported %d bytes, the answer holds %d", got, total)
	}
	seq := 0
	for _, b := range sequentialFetch(parts, offsets, partMax, maxBytes) {
		seq += len(b)
	}
	if seq > 0 && total == 0 {
		t.Fatalf("empty answer; read one after another it holds %d bytes", seq)
	}
}

// TestFetchColdPartitionsConcurrentWithinBudget fills random fetches of slow (cold) and
// fast partitions: the answers keep max bytes, partition max bytes, KIP-74's first batch
// and request order as reading one partition after another does, and cold partitions
// are read concurrently (never more than maxColdReads at once).
func TestFetchColdPartitionsConcurrentWithinBudget(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 14))
	s := &Server{}
	peak := int32(0)
	for iter := range 300 {
		stats := &readStats{limits: map[byte]int{}}
		n := 1 + rng.IntN(14)
		parts := make([]*coldPart, n)
		offsets := make([]int64, n)
		partMax := make([]int, n)
		for i := range parts {
			p := &coldPart{id: byte(i), cold: rng.IntN(4) > 0, delay: time.Millisecond, stats: stats}
			for k := range rng.IntN(12) {
				size := 20 + rng.IntN(300)
				if rng.IntN(10) == 0 {
					size = 500 + rng.IntN(2000) // larger than most limits
				}
				p.batches = append(p.batches, coldBatch(byte(i), int64(k), size))
			}
			parts[i] = p
			offsets[i] = int64(rng.IntN(len(p.batches) + 1)) // at the end: nothing to read
			partMax[i] = rng.IntN(1200)
		}
		maxBytes := 1 + rng.IntN(3000)
		ts := coldTargets(parts, offsets, partMax)
		got, errs := s.fillFetch(context.Background(), ts, maxBytes, true)
		if errs {
			t.Fatalf("iteration %d: errors", iter)
		}
		t.Run(fmt.Sprint(iter), func(t *testing.T) { checkFetch(t, parts, offsets, partMax, maxBytes, ts, got) })
		if t.Failed() {
			return
		}
		peak = max(peak, stats.peak.Load())
	}
	if peak < 2 {
		t.Fatalf("at most %d partition read at once: cold partitions are read one after another", peak)
	}
	if peak > maxColdReads+1 { // + the fast partitions read meanwhile on the fetch's goroutine
		t.Fatalf("%d partition reads at once, bound %d", peak, maxColdReads)
	}
}

// TestFetchColdKIP74AfterEmptyPartitions: the first partitions have nothing, the next
// one's batch is larger than its partition max: it is returned whole (a consumer must
// never get stuck on a large batch), and the cold partition after it gets nothing that
// would exceed max bytes.
func TestFetchColdKIP74AfterEmptyPartitions(t *testing.T) {
	stats := &readStats{limits: map[byte]int{}}
	mk := func(id byte, sizes ...int) *coldPart {
		p := &coldPart{id: id, cold: true, delay: 5 * time.Millisecond, stats: stats}
		for k, sz := range sizes {
			p.batches = append(p.batches, coldBatch(id, int64(k), sz))
		}
		return p
	}
	parts := []*coldPart{mk(0), mk(1), mk(2, 5000, 100), mk(3, 900, 900)}
	offsets := []int64{0, 0, 0, 0}
	partMax := []int{1000, 1000, 1000, 1000}
	ts := coldTargets(parts, offsets, partMax)
	got, _ := (&Server{}).fillFetch(context.Background(), ts, 2000, true)
	checkFetch(t, parts, offsets, partMax, 2000, ts, got)
	if len(ts[2].out.RecordBatches) != 5000 {
		t.Fatalf("partition 2 got %d bytes, want its whole 5000-byte first batch", len(ts[2].out.RecordBatches))
	}
	if n := len(ts[3].out.RecordBatches); n != 0 {
		t.Fatalf("partition 3 got %d bytes after a 5000-byte batch in a 2000-byte fetch", n)
	}
	if peak := stats.peak.Load(); peak < 2 {
		t.Fatalf("peak %d concurrent reads of 4 cold partitions", peak)
	}
}

// TestFetchColdLaterWaveUsesLeftover: partitions early in the request are empty, so the
// budget they were given is read by the partitions after them in a later wave.
func TestFetchColdLaterWaveUsesLeftover(t *testing.T) {
	stats := &readStats{limits: map[byte]int{}}
	var parts []*coldPart
	for i := range 6 {
		p := &coldPart{id: byte(i), cold: true, delay: time.Millisecond, stats: stats}
		if i >= 2 {
			for k := range 10 {
				p.batches = append(p.batches, coldBatch(byte(i), int64(k), 100))
			}
		}
		parts = append(parts, p)
	}
	offsets := make([]int64, 6)
	partMax := []int{1000, 1000, 1000, 1000, 1000, 1000}
	ts := coldTargets(parts, offsets, partMax)
	got, _ := (&Server{}).fillFetch(context.Background(), ts, 2500, true)
	checkFetch(t, parts, offsets, partMax, 2500, ts, got)
	// The first wave gives partitions 0, 1 and 2 the whole budget (1000, 1000, 500);
	// 0 and 1 leave theirs unused, which a second wave gives 3 and 4: the fetch is as
	// full as reading one partition after another makes it.
	if got != 2500 {
		t.Fatalf("fetch of 2500 bytes holds %d: the budget left by empty partitions went unused", got)
	}
	if len(ts[3].out.RecordBatches) == 0 || len(ts[4].out.RecordBatches) == 0 {
		t.Fatalf("partitions 3 and 4 got %d and %d bytes", len(ts[3].out.RecordBatches), len(ts[4].out.RecordBatches))
	}
}

// panicPart panics in Read, as a bug in a read path would.
type panicPart struct{ coldPart }

func (p *panicPart) Read(context.Context, int64, int, bool, int32) ([]byte, int64, int64, error) {
	panic("read path bug")
}

// TestFetchColdPanicReachesHandler: a panic in a partition read on a worker goroutine
// is raised again on the fetch's own goroutine (where the server contains a handler's
// panic), not left to crash the process.
func TestFetchColdPanicReachesHandler(t *testing.T) {
	stats := &readStats{limits: map[byte]int{}}
	ok := &coldPart{id: 0, cold: true, stats: stats}
	bad := &panicPart{coldPart{id: 1, cold: true, stats: stats}}
	targets := coldTargets([]*coldPart{ok, ok}, []int64{0, 0}, []int{100, 100})
	targets[1].r = bad
	defer func() {
		if p := recover(); p != "read path bug" {
			t.Fatalf("recovered %v, want the read's panic", p)
		}
	}()
	(&Server{}).fillFetch(context.Background(), targets, 1000, true)
	t.Fatal("fillFetch returned after a read panicked")
}
