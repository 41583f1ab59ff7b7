package tier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/internal/kcode"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/objread"
	"github.com/weir-io/weir/wal"
)

// ErrWALFull: the WAL holds Config.WALMaxBytes because uploads are behind; produce is
// refused (KAFKA_STORAGE_ERROR, retriable) until the uploader catches up.
var ErrWALFull = kcode.New("tier: WAL full: object storage uploads are behind", kcode.KafkaStorageError)

// Deps is what the tier works with; everything is owned by the broker.
type Deps struct {
	NodeID int32
	// Store is the object store (the tier wraps it with retries and metrics).
	Store objectstore.Store
	// Meta is the cluster metadata; Manifest the same store's object manifests.
	Meta     metadata.Store
	Manifest metadata.ObjectManifest
	// WAL is this broker's write-ahead log: what it uploads from and trims.
	WAL *wal.WAL
	// Led returns the partitions this broker leads now.
	Led func() []*partlog.Partition

	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Now is the clock for retention.ms; nil: time.Now.
	Now func() time.Time
	// LeaseOK reports whether the broker's lease is valid; nil: always. Garbage
	// collection deletes nothing without it: a broker cut off from the controllers
	// works from a view that may be arbitrarily old.
	LeaseOK func() bool
}

// Tier runs the object tier of one broker.
type Tier struct {
	cfg          Config
	d            Deps
	log          *slog.Logger
	objects      objectstore.Store // retrying, instrumented
	manifest     metadata.ObjectManifest
	reader       *objread.Reader
	instrumented *objectstore.Instrumented
	metrics      *metrics

	pinMu sync.Mutex
	pins  map[partlog.Key]walPin // WAL positions others still need (trim.go)
	// proxyPins: batches written as a zone-routing proxy, in WAL order (proxypins.go)
	proxyPins map[partlog.Key][]*ProxyPin

	upMu sync.Mutex
	// objBuf is the last object's buffer, reused by the next (objectBuffer).
	objBuf    []byte
	inflight  map[uint64]bool // prepared objects an upload is using
	preparing int             // PrepareObject calls under way (their IDs are not in inflight yet)
	// unusedPrepared: own prepared objects unused at the last garbage collection
	unusedPrepared map[uint64]bool
	gcRounds       int // collections run (only the retention loop touches it)
	// upBackoff, upNotBefore: the wait after failed uploads (only the upload loop
	// touches them; uploader.go).
	upBackoff   time.Duration
	upNotBefore time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns the tier; Start runs its loops.
func New(cfg Config, d Deps) (*Tier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Store == nil || d.Manifest == nil || d.WAL == nil || d.Meta == nil || d.Led == nil {
		return nil, errors.New("tier: store, metadata, manifest, WAL and partitions are required")
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	t := &Tier{cfg: cfg, d: d, log: d.Logger, manifest: d.Manifest, pins: map[partlog.Key]walPin{}, proxyPins: map[partlog.Key][]*ProxyPin{}, inflight: map[uint64]bool{}}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	// Every attempt is counted (S3 requests are money); retries are ours, logged.
	in, err := objectstore.NewInstrumented(d.Store, d.Registerer)
	if err != nil {
		return nil, fmt.Errorf("tier: %w", err)
	}
	pol := objectstore.DefaultRetryPolicy()
	pol.OnRetry = func(op, key string, attempt int, err error, delay time.Duration) {
		t.log.Info("object store: retrying", "op", op, "key", key, "attempt", attempt, "err", err, "in", delay)
	}
	t.objects = objectstore.NewRetrying(in, pol)
	rcfg := cfg.Read
	if rcfg.Registerer == nil {
		rcfg.Registerer = d.Registerer
	}
	if rcfg.Logger == nil {
		rcfg.Logger = t.log
	}
	r, err := objread.New(t.objects, rcfg)
	if err != nil {
		in.Unregister()
		return nil, fmt.Errorf("tier: object reader: %w", err)
	}
	t.reader, t.instrumented = r, in
	t.metrics = newMetrics(d.Registerer)
	return t, nil
}

// Start runs the upload and retention loops until Close.
func (t *Tier) Start() {
	t.wg.Add(2)
	go t.every(t.cfg.CheckInterval, t.UploadRound)
	go t.every(t.cfg.RetentionInterval, t.RetentionRound)
	if t.cfg.CompactInterval > 0 {
		t.wg.Add(1)
		go t.every(t.cfg.CompactInterval, t.CompactRound)
	}
}

// Close stops the loops and releases the reader and metrics.
func (t *Tier) Close() {
	t.cancel()
	t.wg.Wait()
	t.reader.Close()
	t.instrumented.Unregister()
	t.metrics.close()
}

// every calls fn every d until Close.
func (t *Tier) every(d time.Duration, fn func()) {
	defer t.wg.Done()
	tk := time.NewTicker(d)
	defer tk.Stop()
	for {
		select {
		case <-tk.C:
		case <-t.ctx.Done():
			return
		}
		fn()
	}
}

// WALHeld is the bytes the WAL keeps on disk (segments not trimmed).
func (t *Tier) WALHeld() int64 { return int64(t.d.WAL.End() - t.d.WAL.Start()) }

// Admit is the delay to impose on a produce request, or ErrWALFull.
func (t *Tier) Admit() (time.Duration, error) {
	lim := t.cfg.WALMaxBytes
	if lim <= 0 {
		return 0, nil
	}
	held := t.WALHeld()
	soft := lim / 4 * 3
	switch {
	case held >= lim:
		return 0, fmt.Errorf("%w: %d bytes held, limit %d", ErrWALFull, held, lim)
	case held > soft:
		return time.Duration(float64(time.Second) * float64(held-soft) / float64(lim-soft)), nil
	}
	return 0, nil
}

// updateGauges refreshes pending bytes, upload lag and WAL size.
func (t *Tier) updateGauges() {
	var pending int64
	var oldest time.Time
	for _, p := range t.d.Led() {
		n, at := p.Pending()
		pending += n
		if !at.IsZero() && (oldest.IsZero() || at.Before(oldest)) {
			oldest = at
		}
	}
	lag := 0.0
	if !oldest.IsZero() {
		lag = time.Since(oldest).Seconds()
	}
	t.metrics.pending.Set(float64(pending))
	t.metrics.lag.Set(lag)
	t.metrics.walHeld.Set(float64(t.WALHeld()))
}
