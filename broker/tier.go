package broker

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/objread"
)

// The object tier: with an object store (Config.Objects) and a metadata store that keeps
// object manifests (metadata.ObjectManifest), the broker uploads its WAL's data to
// objects (uploader.go), trims the WAL below what is uploaded (trim.go), serves old
// offsets from objects (fetch.go through objread), applies retention and deletes objects
// no one needs (retention.go). Without either, the WAL keeps everything.

// errWALFull: the WAL holds TierConfig.WALMaxBytes because uploads are behind; produce is
// refused (KAFKA_STORAGE_ERROR, retriable) until the uploader catches up.
var errWALFull = errors.New("broker: WAL full: object storage uploads are behind")

// errStorage: a read from the WAL or object storage failed (KAFKA_STORAGE_ERROR; the
// consumer retries).
var errStorage = errors.New("broker: storage read failed")

// TierConfig configures the object tier.
type TierConfig struct {
	// TargetObjectBytes is the object size the uploader waits for (8 MiB: S3 requests are
	// money); a partition with that much pending data gets an object of its own.
	TargetObjectBytes int64
	// MaxObjectBytes bounds one object.
	MaxObjectBytes int64
	// MaxUploadDelay uploads whatever is pending once its oldest batch is this old, so a
	// quiet cluster still moves its data out of the WAL.
	MaxUploadDelay time.Duration
	// BlockSize is the object block size (objfmt.Options.BlockSize): the unit of ranged
	// reads and of the block cache.
	BlockSize int
	// CheckInterval is how often the uploader looks for pending data.
	CheckInterval time.Duration
	// WALMaxBytes bounds the WAL while uploads lag: above 3/4 of it produce requests are
	// slowed (throttle_time_ms, delayed answers), at it they fail with
	// KAFKA_STORAGE_ERROR. 0: no bound (the disk is).
	WALMaxBytes int64
	// RetentionInterval is how often retention.ms/retention.bytes are applied and
	// unneeded objects deleted (log.retention.check.interval.ms).
	RetentionInterval time.Duration
	// Read configures the object read path (block cache, readahead).
	Read objread.Config
}

// DefaultTierConfig returns the defaults.
func DefaultTierConfig() TierConfig {
	return TierConfig{
		TargetObjectBytes: 8 << 20,
		MaxObjectBytes:    64 << 20,
		MaxUploadDelay:    10 * time.Second,
		BlockSize:         1 << 20,
		CheckInterval:     200 * time.Millisecond,
		WALMaxBytes:       8 << 30,
		RetentionInterval: 30 * time.Second,
		Read:              objread.DefaultConfig(),
	}
}

// Validate fills zero fields with defaults and reports the first invalid setting.
func (c *TierConfig) Validate() error {
	d := DefaultTierConfig()
	if c.TargetObjectBytes == 0 && c.MaxObjectBytes == 0 && c.MaxUploadDelay == 0 && c.BlockSize == 0 {
		*c = d // a Config literal without a tier: defaults
	}
	switch {
	case c.TargetObjectBytes < 1:
		return fmt.Errorf("broker: target object bytes must be > 0")
	case c.MaxObjectBytes < c.TargetObjectBytes:
		return fmt.Errorf("broker: max object bytes %d is below the target %d", c.MaxObjectBytes, c.TargetObjectBytes)
	case c.MaxUploadDelay <= 0 || c.CheckInterval <= 0 || c.RetentionInterval <= 0:
		return fmt.Errorf("broker: upload delay, check and retention intervals must be > 0")
	case c.BlockSize < 4096:
		return fmt.Errorf("broker: object block size %d is too small (>= 4096)", c.BlockSize)
	case c.WALMaxBytes < 0:
		return fmt.Errorf("broker: WAL max bytes must be >= 0")
	}
	return c.Read.Validate()
}

// BindFlags registers the tier's flags.
func (c *TierConfig) BindFlags(fs *flag.FlagSet) {
	fs.Int64Var(&c.TargetObjectBytes, "upload-target-bytes", c.TargetObjectBytes, "object size the uploader waits for; a partition with this much pending data gets its own object")
	fs.Int64Var(&c.MaxObjectBytes, "upload-max-bytes", c.MaxObjectBytes, "largest object the uploader writes")
	fs.DurationVar(&c.MaxUploadDelay, "upload-max-delay", c.MaxUploadDelay, "upload pending data once it is this old, even if less than the target size")
	fs.Int64Var(&c.WALMaxBytes, "wal-max-bytes", c.WALMaxBytes, "WAL size at which produce fails while uploads lag (slowed from 3/4 of it); 0 = no bound")
	fs.DurationVar(&c.RetentionInterval, "retention-check-interval", c.RetentionInterval, "how often retention.ms/retention.bytes are applied and unneeded objects deleted")
	fs.Int64Var(&c.Read.BlockCacheBytes, "block-cache-bytes", c.Read.BlockCacheBytes, "memory for object blocks read by lagging consumers")
	fs.Int64Var(&c.Read.ReadaheadBytes, "readahead-bytes", c.Read.ReadaheadBytes, "how far ahead of a sequential consumer object blocks are prefetched; 0 disables")
}

// tiered reports whether the object tier runs on this broker.
func (b *Broker) tiered() bool { return b.manifest != nil }

// manifestOf returns the store's object manifest, if it keeps one.
func manifestOf(s metadata.Store) metadata.ObjectManifest {
	m, _ := s.(metadata.ObjectManifest)
	return m
}

// walHeld is the bytes the WAL keeps on disk (segments not trimmed).
func (b *Broker) walHeld() int64 { return int64(b.wal.End() - b.wal.Start()) }

// produceBackpressure is the delay to impose on a produce request, or errWALFull.
func (b *Broker) produceBackpressure() (time.Duration, error) {
	lim := b.cfg.Tier.WALMaxBytes
	if !b.tiered() || lim <= 0 {
		return 0, nil
	}
	held := b.walHeld()
	soft := lim / 4 * 3
	switch {
	case held >= lim:
		return 0, fmt.Errorf("%w: %d bytes held, limit %d", errWALFull, held, lim)
	case held > soft:
		return time.Duration(float64(time.Second) * float64(held-soft) / float64(lim-soft)), nil
	}
	return 0, nil
}

// openTier turns the tier on when both an object store and object manifests exist.
func (b *Broker) openTier() error {
	if b.cfg.Objects == nil {
		return nil
	}
	m := manifestOf(b.meta)
	if m == nil {
		b.log.Warn("object store configured but the metadata store keeps no object manifests; the WAL keeps everything")
		return nil
	}
	// Every attempt is counted (S3 requests are money); retries are ours, logged.
	in, err := objectstore.NewInstrumented(b.cfg.Objects, b.cfg.Registerer)
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	pol := objectstore.DefaultRetryPolicy()
	pol.OnRetry = func(op, key string, attempt int, err error, delay time.Duration) {
		b.log.Info("object store: retrying", "op", op, "key", key, "attempt", attempt, "err", err, "in", delay)
	}
	store := objectstore.NewRetrying(in, pol)
	rcfg := b.cfg.Tier.Read
	if rcfg.Registerer == nil {
		rcfg.Registerer = b.cfg.Registerer
	}
	if rcfg.Logger == nil {
		rcfg.Logger = b.log
	}
	r, err := objread.New(store, rcfg)
	if err != nil {
		in.Unregister()
		return fmt.Errorf("broker: object reader: %w", err)
	}
	b.objects, b.manifest, b.objReader, b.instrumented = store, m, r, in
	return nil
}

func (b *Broker) closeTier() {
	if b.objReader != nil {
		b.objReader.Close()
		b.instrumented.Unregister()
	}
}

// WALBytes is the bytes this broker's WAL keeps on disk; with the object tier it shrinks
// as uploaded segments are trimmed.
func (b *Broker) WALBytes() int64 { return b.walHeld() }

// every calls fn every d until the broker closes (a wg member).
func (b *Broker) every(d time.Duration, fn func()) {
	defer b.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-b.ctx.Done():
			return
		}
		fn()
	}
}
