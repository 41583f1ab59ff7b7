package compact

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/weir-io/weir/internal/recbatch"
)

// ErrCompact wraps the cleaner's errors (a batch that does not decode).
var ErrCompact = errors.New("compact")

// DefaultMaxEntries bounds an offset map: about 50 bytes an entry in a Go map, so ~25 MB.
const DefaultMaxEntries = 500_000

type keyHash [16]byte

func hashKey(k []byte) keyHash {
	s := sha256.Sum256(k)
	var h keyHash
	copy(h[:], s[:16])
	return h
}

// OffsetMap maps keys (by hash) to their latest offset in the dirty section.
type OffsetMap struct {
	m          map[keyHash]int64
	maxEntries int
	// End is one past the last offset added (the dirty section's end).
	End int64
}

// NewOffsetMap returns an empty map bounded to maxEntries (DefaultMaxEntries if <= 0).
func NewOffsetMap(maxEntries int) *OffsetMap {
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	return &OffsetMap{m: make(map[keyHash]int64), maxEntries: maxEntries}
}

// Len is the number of keys; Full reports whether it reached its bound (the caller
// stops adding ranges; one range may take it past the bound, never a second).
func (m *OffsetMap) Len() int   { return len(m.m) }
func (m *OffsetMap) Full() bool { return len(m.m) >= m.maxEntries }

// Latest returns the key's latest offset in the map.
func (m *OffsetMap) Latest(key []byte) (int64, bool) {
	o, ok := m.m[hashKey(key)]
	return o, ok
}

// Add puts the records of a stored batch into the map: not control batches, not the
// batches of aborted transactions, not records with a null key.
func (m *OffsetMap) Add(batch []byte, ab *Aborted, maxDecompressed int) error {
	h, err := recbatch.Frame(batch)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCompact, err)
	}
	m.End = max(m.End, h.LastOffset()+1)
	if h.Control() || (h.Transactional() && ab.Has(h.ProducerID, h.BaseOffset)) {
		return nil
	}
	_, recs, err := recbatch.ReadRecords(batch, maxDecompressed)
	if err != nil {
		return fmt.Errorf("%w: batch at %d: %w", ErrCompact, h.BaseOffset, err)
	}
	for _, r := range recs {
		if r.Key != nil {
			m.m[hashKey(r.Key)] = r.Offset
		}
	}
	return nil
}
