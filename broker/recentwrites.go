package broker

import (
	"sync"

	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/wal"
)

// recentWrites keeps the bytes of the batches this broker wrote to its WAL as a zone
// proxy, for a short while: a read replica of the partition in this broker (this zone's)
// is told of them by the leader's index moments later and would otherwise read them back
// from the shared file system it just wrote them to. Oldest first out past limit bytes;
// the replica's first read keeps them in the tail cache (partlog.Cache.Fill), so they
// need to live here only until then.
type recentWrites struct {
	mu    sync.Mutex
	limit int64
	bytes int64
	order []wal.Pos // FIFO with a moving head
	head  int
	data  map[wal.Pos][]byte
}

func newRecentWrites(limit int64) *recentWrites {
	return &recentWrites{limit: limit, data: map[wal.Pos][]byte{}}
}

// add keeps data, the batch bytes at pos in this broker's current WAL. data must not
// change afterwards.
func (r *recentWrites) add(pos wal.Pos, data []byte) {
	if r == nil || r.limit <= 0 || int64(len(data)) > r.limit {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.data[pos]; ok {
		return
	}
	r.data[pos] = data
	r.order = append(r.order, pos)
	r.bytes += int64(len(data))
	for r.bytes > r.limit && r.head < len(r.order) {
		old := r.order[r.head]
		r.head++
		r.bytes -= int64(len(r.data[old]))
		delete(r.data, old)
	}
	if r.head > 1024 && r.head*2 > len(r.order) {
		r.order = append([]wal.Pos(nil), r.order[r.head:]...)
		r.head = 0
	}
}

// readAt fills p with the bytes kept at pos, if a batch of exactly that size is kept.
func (r *recentWrites) readAt(p []byte, pos wal.Pos) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.data[pos]
	if !ok || len(d) != len(p) {
		return false
	}
	copy(p, d)
	return true
}

// recentReader reads this broker's current WAL, the batches it wrote as a proxy from
// memory while recentWrites keeps them.
type recentReader struct {
	partlog.Reader
	recent *recentWrites
}

func (r recentReader) ReadAt(p []byte, pos wal.Pos) error {
	if r.recent.readAt(p, pos) {
		return nil
	}
	return r.Reader.ReadAt(p, pos)
}
