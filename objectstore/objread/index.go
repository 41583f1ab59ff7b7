package objread

import (
	"context"
	"errors"
	"fmt"

	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/objfmt"
)

// objIndex is a parsed, verified index of one object.
type objIndex struct {
	idx  *objfmt.Index
	size int64 // estimated memory, for the index cache bound
}

// Memory estimate of a parsed index: objfmt.Block is 56 bytes in a slice, a
// PartitionIndex about 112; plus the map entry, the list element and the key.
const (
	blockMem     = 56
	partitionMem = 112
	indexMem     = 256
)

func newObjIndex(key string, idx *objfmt.Index) *objIndex {
	return &objIndex{idx: idx, size: int64(blockMem*idx.BlockCount() + partitionMem*len(idx.Partitions()) + indexMem + len(key))}
}

// index returns the parsed index of ref's object: from the cache, or from the store with
// one GET of the tail (two when the index is larger than the tail). Concurrent misses of
// one key share one load.
func (r *Reader) index(ctx context.Context, ref ObjectRef) (*objfmt.Index, error) {
	if oi, ok := r.indexes.get(ref.Key); ok {
		r.m.hits.WithLabelValues(kindIndex).Inc()
		return oi.idx, nil
	}
	for {
		c, owner := r.indexFlight.claim(ref.Key)
		if !owner {
			r.m.coalesced.WithLabelValues(kindIndex).Inc()
			oi, err := c.wait(ctx)
			if retryable(ctx, err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			return oi.idx, nil
		}
		// Between our cache miss and the claim, another load may have finished.
		oi, ok := r.indexes.get(ref.Key)
		var err error
		if ok {
			r.m.hits.WithLabelValues(kindIndex).Inc()
		} else {
			r.m.misses.WithLabelValues(kindIndex).Inc()
			if oi, err = r.loadIndex(ctx, ref); err == nil {
				r.indexes.put(ref.Key, oi, oi.size)
			}
		}
		r.indexFlight.finish(ref.Key, c, oi, err)
		if err != nil {
			return nil, err
		}
		return oi.idx, nil
	}
}

// loadIndex reads the footer and index of ref's object and checks the footer against
// the object's size.
func (r *Reader) loadIndex(ctx context.Context, ref ObjectRef) (*objIndex, error) {
	size := ref.Size
	if size <= 0 {
		r.m.requests.WithLabelValues(purposeIndex).Inc()
		info, err := r.store.Head(ctx, ref.Key)
		if err != nil {
			return nil, fmt.Errorf("objread: head %q: %w", ref.Key, err)
		}
		size = info.Size
	}
	if size < objfmt.FooterSize {
		return nil, r.corrupt(ref.Key, fmt.Errorf("object of %d bytes is shorter than a footer", size))
	}
	tailOff := max(0, size-objfmt.DefaultTailSize)
	tail, err := r.get(ctx, ref.Key, tailOff, size-tailOff, purposeIndex)
	if err != nil {
		return nil, err
	}
	f, idx, err := objfmt.ParseTail(tail)
	if err != nil {
		return nil, r.corrupt(ref.Key, err)
	}
	if f.ObjectSize() != size {
		return nil, r.corrupt(ref.Key, fmt.Errorf("footer describes a %d-byte object, it has %d", f.ObjectSize(), size))
	}
	if idx == nil {
		off, n := f.IndexRange()
		b, err := r.get(ctx, ref.Key, off, n, purposeIndex)
		if err != nil {
			return nil, err
		}
		if idx, err = objfmt.ParseIndex(b, f); err != nil {
			return nil, r.corrupt(ref.Key, err)
		}
	}
	return newObjIndex(ref.Key, idx), nil
}

// get reads exactly n bytes at off of key into memory, counted under purpose. A short
// read means the object is shorter than its footer or the manifest says: corruption.
func (r *Reader) get(ctx context.Context, key string, off, n int64, purpose string) ([]byte, error) {
	if err := r.acquireGet(ctx); err != nil {
		return nil, r.storeErr(key, off, n, err)
	}
	r.m.requests.WithLabelValues(purpose).Inc()
	b, err := objectstore.ReadRange(ctx, r.store, key, off, n)
	r.releaseGet()
	r.m.fetched.WithLabelValues(purpose).Add(float64(len(b)))
	if err != nil {
		return nil, r.storeErr(key, off, n, err)
	}
	if int64(len(b)) != n {
		return nil, r.corrupt(key, fmt.Errorf("read %d bytes at %d, wanted %d: object too short", len(b), off, n))
	}
	return b, nil
}

// storeErr wraps an error of a GET. A range the store calls invalid lies past the end
// of the object: the object is shorter than its index says, which is corruption.
func (r *Reader) storeErr(key string, off, n int64, err error) error {
	err = fmt.Errorf("objread: get %q bytes [%d, +%d): %w", key, off, n, err)
	if errors.Is(err, objectstore.ErrInvalidRange) {
		return r.corrupt(key, err)
	}
	return err
}

// partition looks up a partition in ref's object index, loading the index if needed.
func (r *Reader) partition(ctx context.Context, ref ObjectRef, topicID [16]byte, partition int32) (*objfmt.PartitionIndex, error) {
	idx, err := r.index(ctx, ref)
	if err != nil {
		return nil, err
	}
	return partitionOf(idx, ref, topicID, partition)
}

// cachedPartition is partition from the cache only: errNotCached if the index is not.
func (r *Reader) cachedPartition(ref ObjectRef, topicID [16]byte, partition int32) (*objfmt.PartitionIndex, error) {
	oi, ok := r.indexes.get(ref.Key)
	if !ok {
		return nil, errNotCached
	}
	return partitionOf(oi.idx, ref, topicID, partition)
}

var errNotCached = errors.New("objread: index not cached")

// partitionOf finds the partition in idx; a partition the index does not hold is
// ErrNotInObject.
func partitionOf(idx *objfmt.Index, ref ObjectRef, topicID [16]byte, partition int32) (*objfmt.PartitionIndex, error) {
	p, ok := idx.Partition(topicID, partition)
	if !ok {
		return nil, fmt.Errorf("%w: object %q has no partition %x/%d", ErrNotInObject, ref.Key, topicID, partition)
	}
	return p, nil
}
