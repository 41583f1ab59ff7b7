package partlog

import (
	"sync"

	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
)

// Loader reads partitions' batches out of the WALs of their log chains: this broker's own
// (through the WAL itself) and other brokers' through read-only views on the shared file
// system, one view per broker for the loader's lifetime (a view picks up new segments by
// itself, so repeated moves do not pile up open files).
type Loader struct {
	self int32
	own  *wal.WAL
	dir  func(broker int32) (string, error)

	mu    sync.Mutex
	views map[int32]*wal.ReadOnly
}

// NewLoader returns a loader for broker self, whose WAL is own; dir names the directory
// of any broker's WAL.
func NewLoader(self int32, own *wal.WAL, dir func(broker int32) (string, error)) *Loader {
	return &Loader{self: self, own: own, dir: dir, views: map[int32]*wal.ReadOnly{}}
}

// View returns the read-only view of broker's WAL.
func (l *Loader) View(broker int32) (*wal.ReadOnly, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ro := l.views[broker]; ro != nil {
		return ro, nil
	}
	dir, err := l.dir(broker)
	if err != nil {
		return nil, err
	}
	ro, err := wal.OpenReadOnly(dir, nil)
	if err != nil {
		return nil, err
	}
	l.views[broker] = ro
	return ro, nil
}

// Load scans each WAL that holds some of the given ranges once and Collects, into each
// partition, the batches that fall in its ranges.
func (l *Loader) Load(parts []*Partition, ranges map[*Partition][]LogRange) error {
	byBroker := map[int32][]*Partition{}
	for _, p := range parts {
		for _, r := range ranges[p] {
			byBroker[r.Broker] = append(byBroker[r.Broker], p)
		}
	}
	for broker, ps := range byBroker {
		ro, err := l.View(broker)
		if err != nil {
			return err
		}
		var src Reader = ro
		if broker == l.self {
			src = l.own // same positions; reads of our own WAL go through it
		}
		want := map[metadata.TopicID]map[int32]*Partition{}
		for _, p := range ps {
			if want[p.id] == nil {
				want[p.id] = map[int32]*Partition{}
			}
			want[p.id][p.index] = p
		}
		_, err = ro.Scan(func(typ byte, payload []byte, pos wal.Pos) error {
			if typ != RecBatch {
				return nil
			}
			id, idx, batch, err := DecodeBatchRec(payload)
			if err != nil {
				return nil // not ours to judge; the owner's replay reports damage
			}
			p := want[id][idx]
			if p == nil {
				return nil
			}
			h, err := recbatch.Parse(batch)
			if err != nil {
				return nil
			}
			for _, r := range ranges[p] {
				if r.Broker == broker && r.Holds(h.BaseOffset) {
					p.Collect(&h, src, pos+BatchRecHdr, len(batch))
					break
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Close closes the read-only views.
func (l *Loader) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, ro := range l.views {
		ro.Close()
		delete(l.views, id)
	}
}
