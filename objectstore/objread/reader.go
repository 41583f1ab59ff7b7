package objread

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weir-io/weir/objectstore"
)

var (
	// ErrCorrupt reports an object whose footer, index or block does not verify (or has
	// a format version this build does not read). The error also wraps the objfmt error
	// and names the object's key. Nothing of a corrupt block is cached or served.
	ErrCorrupt = errors.New("objread: corrupt object")
	// ErrNotInObject reports an offset outside objs[0]'s range (or no objs), or a
	// partition that the object's index does not hold: the caller's manifest and the
	// offset disagree, or the manifest is stale.
	ErrNotInObject = errors.New("objread: offset not in object")
	// ErrClosed reports use of a closed Reader.
	ErrClosed = errors.New("objread: reader closed")
)

// ObjectRef is one object of a partition's manifest and the partition's offsets in it.
// Size 0 means unknown: the Reader then asks the store (HEAD) before reading the tail.
type ObjectRef struct {
	Key                     string
	Size                    int64
	FirstOffset, LastOffset int64
}

// Config configures a Reader. Start from DefaultConfig: zero values disable things.
type Config struct {
	// BlockCacheBytes bounds the cached block bytes (default 256 MiB); 0 disables block
	// caching, and with it readahead.
	BlockCacheBytes int64
	// IndexCacheBytes bounds the cached parsed indexes, by an estimate of their memory
	// (default 32 MiB); 0 disables index caching (every read fetches the index).
	IndexCacheBytes int64
	// ReadaheadBytes is how far past the end of a sequential reader's read to prefetch
	// (default 16 MiB: 4 GETs of MaxGetBytes in flight); 0 disables readahead. At most half of BlockCacheBytes, or
	// readahead would evict what it just fetched.
	ReadaheadBytes int64
	// MaxReadaheads bounds concurrent background prefetches (default 8); 0 disables
	// readahead. A sequential read that finds no free slot does not wait: it skips.
	MaxReadaheads int
	// MaxGetBytes splits a run of adjacent missing blocks longer than this into ranged
	// GETs of about this size, issued in parallel (default 4 MiB; at least one block per
	// GET): one GET stream of an object store is slower than several, so a large read or
	// a readahead window keeps several GETs in flight (S3's guidance for ranged GETs is
	// 8-16 MB; smaller ones cost more requests per GB). 0: one GET per run.
	MaxGetBytes int64
	// MaxGets bounds the block and index GETs of this Reader in flight at once, reads
	// and readahead together (default 32; 0: no bound), so that many concurrent fetches
	// do not open a connection each to the store. A read waits for a free slot.
	MaxGets int
	// Registerer receives the weir_objread_* metrics; nil records none.
	Registerer prometheus.Registerer
	// Logger for corruption and background errors; nil discards.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		BlockCacheBytes: 256 << 20,
		IndexCacheBytes: 32 << 20,
		ReadaheadBytes:  16 << 20,
		MaxReadaheads:   8,
		MaxGetBytes:     4 << 20,
		MaxGets:         32,
	}
}

// Validate reports the first invalid setting.
func (c Config) Validate() error {
	switch {
	case c.BlockCacheBytes < 0:
		return fmt.Errorf("objread: block cache bytes %d < 0", c.BlockCacheBytes)
	case c.IndexCacheBytes < 0:
		return fmt.Errorf("objread: index cache bytes %d < 0", c.IndexCacheBytes)
	case c.ReadaheadBytes < 0:
		return fmt.Errorf("objread: readahead bytes %d < 0", c.ReadaheadBytes)
	case c.MaxReadaheads < 0:
		return fmt.Errorf("objread: max readaheads %d < 0", c.MaxReadaheads)
	case c.MaxGetBytes < 0:
		return fmt.Errorf("objread: max GET bytes %d < 0", c.MaxGetBytes)
	case c.MaxGets < 0:
		return fmt.Errorf("objread: max GETs %d < 0", c.MaxGets)
	case c.BlockCacheBytes > 0 && c.ReadaheadBytes > c.BlockCacheBytes/2:
		return fmt.Errorf("objread: readahead bytes %d more than half the block cache (%d bytes)", c.ReadaheadBytes, c.BlockCacheBytes)
	}
	return nil
}

// Reader reads record batches from data objects. Safe for concurrent use.
type Reader struct {
	store objectstore.Store
	cfg   Config
	log   *slog.Logger
	m     *metrics

	indexes     *lru[string, *objIndex]
	indexFlight *flight[string, *objIndex]
	blocks      *lru[blockKey, *block]
	blockFlight *flight[blockKey, *block]
	ra          readahead
	gets        chan struct{} // a token per GET in flight; nil: no bound

	mu     sync.Mutex // guards closed and ra.wg.Add against Close
	closed bool
}

// New returns a Reader of store.
func New(store objectstore.Store, cfg Config) (*Reader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, errors.New("objread: store is required")
	}
	r := &Reader{store: store, cfg: cfg, log: cfg.Logger}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.indexes = newLRU[string, *objIndex](cfg.IndexCacheBytes, nil, nil)
	r.indexFlight = newFlight[string, *objIndex]()
	r.blocks = newLRU(cfg.BlockCacheBytes, blockKey.group, r.blockEvicted)
	r.blockFlight = newFlight[blockKey, *block]()
	r.ra.init(cfg)
	if cfg.MaxGets > 0 {
		r.gets = make(chan struct{}, cfg.MaxGets)
	}
	m, err := newMetrics(cfg.Registerer, func(kind string) float64 {
		if kind == kindIndex {
			return float64(r.indexes.bytes())
		}
		return float64(r.blocks.bytes())
	})
	if err != nil {
		return nil, err
	}
	r.m = m
	return r, nil
}

// Forget drops the cached index and blocks of object key (deleted by retention or
// garbage collection). A fetch of key in flight may still cache what it fetched; the
// LRU ages it out.
func (r *Reader) Forget(key string) {
	r.indexes.remove(key)
	r.blocks.removeGroup(key)
}

// Close stops background readahead, waits for it, and unregisters the metrics. Reads
// after Close fail with ErrClosed.
func (r *Reader) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.ra.stop()
	r.m.unregister()
	return nil
}

// acquireGet waits for a free GET slot (MaxGets); release with releaseGet.
func (r *Reader) acquireGet(ctx context.Context) error {
	if r.gets == nil {
		return nil
	}
	select { // a free slot first: the store reports a context that ended
	case r.gets <- struct{}{}:
		return nil
	default:
	}
	select {
	case r.gets <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Reader) releaseGet() {
	if r.gets != nil {
		<-r.gets
	}
}

func (r *Reader) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// corrupt wraps an objfmt error of object key so that it is both ErrCorrupt and the
// objfmt error, and logs it: corruption in object storage needs a human.
func (r *Reader) corrupt(key string, err error) error {
	r.log.Error("objread: corrupt object", "key", key, "err", err)
	return fmt.Errorf("%w %q: %w", ErrCorrupt, key, err)
}
