package wal

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a WAL. Start from DefaultConfig.
type Config struct {
	Dir string
	// SegmentSize is the size of a segment file (default 64 MiB). A record
	// larger than this gets a segment sized to fit.
	SegmentSize int64
	// SegmentMaxAge rolls the active segment at the first append after its first
	// record is this old (default DefaultSegmentMaxAge; 0: roll by size only). The log
	// is trimmed by whole segments, so without it a segment holds SegmentSize bytes of
	// records however slowly they come: a 64 MiB segment is 64 s of a 1 MB/s broker, all
	// kept until its last record is uploaded. The roll is the one a full segment makes
	// (commit.go, take).
	SegmentMaxAge time.Duration
	// Now is the clock of SegmentMaxAge (default time.Now); tests inject one.
	Now func() time.Time
	// MaxGroupBytes caps the bytes of one write+sync group (default 4 MiB). A
	// single record larger than this forms a group of its own.
	MaxGroupBytes int
	// QueueDepth is the number of queued entries beyond which Append blocks
	// (default 4096).
	QueueDepth int
	// MaxRecordSize is the largest payload Append accepts (default 64 MiB, at
	// most MaxPayloadSize); larger entries fail with ErrTooLarge.
	MaxRecordSize int
	// Preallocate (default true) preallocates new segments: fallocate to
	// reserve the space, then zero-fill and fdatasync the file, in the
	// background, before the segment is used. Appends then overwrite
	// initialized blocks, so fdatasync has no metadata (size, extent state) to
	// commit; on ext4 that halved fdatasync latency for small groups (see
	// doc.go). With Preallocate false segments grow by appending.
	Preallocate bool
	// FS is the file system (default OSFS()).
	FS FS
	// Registerer receives the WAL's metrics; nil means no metrics.
	Registerer prometheus.Registerer
	// Logger receives warnings (replay cuts, dropped segments) and debug
	// messages; nil discards them.
	Logger *slog.Logger
	// NoZeroFill makes Preallocate use fallocate only, without writing zeros.
	// Consider it on NFS, where zero-filling doubles the bytes sent to the
	// server and there is no local journal for it to spare; measure with
	// BenchmarkAppendParallel and BenchmarkSyncLatency.
	NoZeroFill bool
	// Fence makes the WAL own a fence token, the file FENCE in Dir (see doc.go,
	// Fencing). Open refuses a directory a taker has fenced (ErrFenced) and otherwise
	// writes this writer's owner record there, synced, before any append; every group
	// commit then re-reads the token with a fresh open after its fdatasync and before any
	// Done callback, and fails the WAL for good (ErrFenced) if it no longer holds this
	// writer's record or was fenced. Required wherever another broker may take the
	// directory over.
	Fence bool
	// EpochFence, with Fence, is the path of the epoch fence token of the broker whose
	// registration Epoch writes Dir (see epochfence.go): Open refuses (ErrFenced) if the
	// token fences Epoch. Open reads it after writing the owner record, so a taker that
	// marks the token first and then fences the directory by name cannot miss this
	// writer (doc.go, Fencing). Empty: no token (a WAL not taken over by epoch).
	EpochFence string
	// Epoch is the registration epoch Dir belongs to (>= 1 with EpochFence).
	Epoch int64
	// Owner names the writer in FENCE, for operators reading it (e.g. "broker-3 epoch
	// 17"). At most MaxFenceName bytes.
	Owner string
	// AcceptCorruption lets Replay cut the log at a bad record in a segment that is not
	// the last one, deleting the synced records after it (logged at error level). Without
	// it Replay refuses such a log with ErrCorrupt and leaves it untouched: a later
	// segment exists, so the bad record is not a torn tail but damage to data that was
	// synced and maybe acked. Set it only as an operator's decision to accept that loss,
	// after keeping a copy of the directory.
	AcceptCorruption bool
}

// Defaults.
const (
	DefaultSegmentSize = 64 << 20
	// DefaultSegmentMaxAge: with the tier's 10 s MaxUploadDelay a segment is trimmed at
	// most about 20 s after its first record, so the WAL holds at most about 20 s of
	// traffic at any rate (docs/PERFORMANCE.md, WAL held).
	DefaultSegmentMaxAge = 10 * time.Second
	DefaultMaxGroupBytes = 4 << 20
	DefaultQueueDepth    = 4096
	DefaultMaxRecordSize = 64 << 20
	// MinSegmentSize is the smallest SegmentSize Validate accepts.
	MinSegmentSize = HeaderSize + RecordHeaderSize + 1
)

// DefaultConfig returns the default configuration for a WAL in dir.
func DefaultConfig(dir string) Config {
	return Config{
		Dir:           dir,
		SegmentSize:   DefaultSegmentSize,
		SegmentMaxAge: DefaultSegmentMaxAge,
		MaxGroupBytes: DefaultMaxGroupBytes,
		QueueDepth:    DefaultQueueDepth,
		MaxRecordSize: DefaultMaxRecordSize,
		Preallocate:   true,
		FS:            OSFS(),
	}
}

// withDefaults fills zero numeric fields and a nil FS with defaults. Preallocate
// has no "unset" state: a Config literal without it means false.
func (c Config) withDefaults() Config {
	if c.SegmentSize == 0 {
		c.SegmentSize = DefaultSegmentSize
	}
	if c.MaxGroupBytes == 0 {
		c.MaxGroupBytes = DefaultMaxGroupBytes
	}
	if c.QueueDepth == 0 {
		c.QueueDepth = DefaultQueueDepth
	}
	if c.MaxRecordSize == 0 {
		c.MaxRecordSize = DefaultMaxRecordSize
	}
	if c.FS == nil {
		c.FS = OSFS()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports whether c is usable. Zero numeric fields are valid (Open
// replaces them with defaults); negative or out-of-range ones are not.
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("Dir is empty"))
	}
	if c.SegmentSize != 0 && c.SegmentSize < MinSegmentSize {
		errs = append(errs, fmt.Errorf("SegmentSize %d is below the minimum %d", c.SegmentSize, MinSegmentSize))
	}
	if c.SegmentMaxAge < 0 {
		errs = append(errs, fmt.Errorf("SegmentMaxAge %s is negative", c.SegmentMaxAge))
	}
	if c.MaxGroupBytes < 0 {
		errs = append(errs, fmt.Errorf("MaxGroupBytes %d is negative", c.MaxGroupBytes))
	}
	if c.QueueDepth < 0 {
		errs = append(errs, fmt.Errorf("QueueDepth %d is negative", c.QueueDepth))
	}
	if c.MaxRecordSize < 0 || c.MaxRecordSize > MaxPayloadSize {
		errs = append(errs, fmt.Errorf("MaxRecordSize %d is outside [0, %d]", c.MaxRecordSize, MaxPayloadSize))
	}
	if c.EpochFence != "" && (!c.Fence || c.Epoch < 1) {
		errs = append(errs, fmt.Errorf("EpochFence needs Fence and an Epoch >= 1 (Epoch %d)", c.Epoch))
	}
	if len(c.Owner) > MaxFenceName {
		errs = append(errs, fmt.Errorf("Owner is %d bytes, at most %d fit in FENCE", len(c.Owner), MaxFenceName))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("wal: invalid config: %w", err)
	}
	return nil
}
