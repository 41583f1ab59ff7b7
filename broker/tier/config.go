package tier

import (
	"flag"
	"fmt"
	"time"

	"github.com/weir-io/weir/objectstore/objread"
)

// Config configures the object tier.
type Config struct {
	// TargetObjectBytes is the object size the uploader waits for (S3 requests are
	// money): an upload starts once the partitions this broker leads have that much
	// pending in all, and an object smaller than it waits for more unless its data is
	// MaxUploadDelay old. Objects hold many partitions each.
	TargetObjectBytes int64
	// MaxObjectBytes bounds one object; a partition with that much pending fills one
	// alone.
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
	// CompactInterval is how often the log cleaner looks at the compacted topics'
	// partitions this broker leads (log.cleaner.backoff.ms); 0 turns the cleaner off.
	CompactInterval time.Duration
	// CompactMapEntries bounds the cleaner's offset map (keys of one pass); a partition
	// with more distinct keys in its dirty ranges is cleaned in several passes
	// (log.cleaner.dedupe.buffer.size, in keys).
	CompactMapEntries int
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		TargetObjectBytes: 64 << 20,
		MaxObjectBytes:    64 << 20,
		MaxUploadDelay:    10 * time.Second,
		BlockSize:         1 << 20,
		CheckInterval:     200 * time.Millisecond,
		WALMaxBytes:       8 << 30,
		RetentionInterval: 30 * time.Second,
		Read:              objread.DefaultConfig(),
		CompactInterval:   15 * time.Second,
		CompactMapEntries: 500_000,
	}
}

// Validate fills zero fields with defaults and reports the first invalid setting.
func (c *Config) Validate() error {
	d := DefaultConfig()
	if c.TargetObjectBytes == 0 && c.MaxObjectBytes == 0 && c.MaxUploadDelay == 0 && c.BlockSize == 0 {
		*c = d // a Config literal without a tier: defaults
	}
	switch {
	case c.TargetObjectBytes < 1:
		return fmt.Errorf("tier: target object bytes must be > 0")
	case c.MaxObjectBytes < c.TargetObjectBytes:
		return fmt.Errorf("tier: max object bytes %d is below the target %d", c.MaxObjectBytes, c.TargetObjectBytes)
	case c.MaxUploadDelay <= 0 || c.CheckInterval <= 0 || c.RetentionInterval <= 0:
		return fmt.Errorf("tier: upload delay, check and retention intervals must be > 0")
	case c.BlockSize < 4096:
		return fmt.Errorf("tier: object block size %d is too small (>= 4096)", c.BlockSize)
	case c.WALMaxBytes < 0:
		return fmt.Errorf("tier: WAL max bytes must be >= 0")
	case c.CompactInterval < 0 || c.CompactMapEntries < 0:
		return fmt.Errorf("tier: compaction interval and map entries must be >= 0")
	}
	return c.Read.Validate()
}

// BindFlags registers the tier's flags.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.Int64Var(&c.TargetObjectBytes, "upload-target-bytes", c.TargetObjectBytes, "object size the uploader waits for: an upload starts once this much is pending over all partitions led here (objects hold many partitions), or at --upload-max-delay")
	fs.Int64Var(&c.MaxObjectBytes, "upload-max-bytes", c.MaxObjectBytes, "largest object the uploader writes; a partition with this much pending fills one alone")
	fs.DurationVar(&c.MaxUploadDelay, "upload-max-delay", c.MaxUploadDelay, "upload pending data once it is this old, even if less than the target size")
	fs.Int64Var(&c.WALMaxBytes, "wal-max-bytes", c.WALMaxBytes, "WAL size at which produce fails while uploads lag (slowed from 3/4 of it); 0 = no bound")
	fs.DurationVar(&c.RetentionInterval, "retention-check-interval", c.RetentionInterval, "how often retention.ms/retention.bytes are applied and unneeded objects deleted")
	fs.DurationVar(&c.CompactInterval, "compaction-interval", c.CompactInterval, "how often the log cleaner looks at compacted topics' partitions (cleanup.policy=compact); 0 = no compaction")
	fs.IntVar(&c.CompactMapEntries, "compaction-map-entries", c.CompactMapEntries, "keys in the log cleaner's offset map (one pass; ~50 bytes each); more keys are cleaned in several passes")
	fs.Int64Var(&c.Read.BlockCacheBytes, "block-cache-bytes", c.Read.BlockCacheBytes, "memory for object blocks read by lagging consumers")
	fs.Int64Var(&c.Read.ReadaheadBytes, "readahead-bytes", c.Read.ReadaheadBytes, "how far ahead of a sequential consumer object blocks are prefetched; 0 disables")
	fs.Int64Var(&c.Read.MaxGetBytes, "object-get-bytes", c.Read.MaxGetBytes, "object reads (and readahead windows) are split into ranged GETs of about this size, issued in parallel; 0 = one GET per run of adjacent blocks")
	fs.IntVar(&c.Read.MaxGets, "object-max-gets", c.Read.MaxGets, "object GETs of reads and readahead in flight at once on this broker; further reads wait; 0 = no bound")
}
