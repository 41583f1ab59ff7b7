package wal

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/weir-io/weir/internal/kcode"
)

// Sentinel errors. Errors returned or passed to Done wrap them (test with errors.Is).
// Those a client can meet carry the Kafka code it is answered with (internal/kcode):
// a closed WAL is NOT_LEADER_OR_FOLLOWER (this broker shutting down or restarting on a
// new WAL: the client refreshes its metadata and retries), a failed write or sync
// KAFKA_STORAGE_ERROR.
var (
	// ErrClosed: the WAL is closed.
	ErrClosed = kcode.New("wal: closed", kcode.NotLeaderOrFollower)
	// ErrNoSpace: the file system ran out of space (ENOSPC) while writing or
	// allocating. The group failed; later groups may succeed once space is freed,
	// except after a failed write with Config.Fence, which fails the WAL for good
	// (doc.go, Group commit).
	ErrNoSpace = kcode.New("wal: no space left", kcode.KafkaStorageError)
	// ErrIO: a write, read or other file operation failed with an I/O error other than
	// running out of space (EIO, a stale NFS handle). The group failed; later groups may
	// succeed (the next one starts a new segment), except after a failed write with
	// Config.Fence, which fails the WAL for good.
	ErrIO = kcode.New("wal: I/O error", kcode.KafkaStorageError)
	// ErrFailed: an fdatasync (or directory sync) failed; the WAL is failed for
	// good. Failed syncs are never retried (PostgreSQL "fsyncgate"): the kernel
	// may have dropped the dirty pages. Reads of synced data still work.
	ErrFailed = kcode.New("wal: failed", kcode.KafkaStorageError)
	// ErrCorrupt: a record or segment header has a bad checksum or an impossible field.
	ErrCorrupt = errors.New("wal: corrupt record")
	// ErrTorn: a record or segment header is cut short (a torn write).
	ErrTorn = errors.New("wal: torn record")
	// ErrVersion: a segment header (or a FENCE or SEAL file) is intact (magic and
	// checksum match) but of a format version this build does not read. Replay returns it
	// and leaves the log as it is: cutting there, as for damage, would delete a newer
	// build's records.
	ErrVersion = errors.New("wal: unsupported format version")
	// ErrTooLarge: the payload is larger than Config.MaxRecordSize.
	ErrTooLarge = errors.New("wal: record too large")
	// ErrNotReplayed: Append was called before Replay finished.
	ErrNotReplayed = errors.New("wal: not replayed")
	// ErrOutOfRange: ReadAt asked for bytes outside the synced records of one segment
	// (or, in a sealed directory, at or after the seal's End).
	ErrOutOfRange = errors.New("wal: position out of range")
	// ErrFenced: the directory was fenced (a taker wrote its FENCE record, or another
	// writer opened the directory) or sealed, or the fence token could not be read. Open
	// refuses such a directory; a WAL that finds it after a group's fdatasync fails that
	// group and fails for good (the error wraps ErrFailed too): nothing it writes from then
	// on may be acked, since a taker may already have read the directory to its end.
	ErrFenced = errors.New("wal: fenced")
)

// ioError wraps an I/O error in ErrNoSpace for ENOSPC (and EDQUOT on Linux), ErrIO for
// anything else, so callers can tell a storage failure from a bug.
func ioError(op string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || isQuotaError(err) {
		return fmt.Errorf("%w: %s: %w", ErrNoSpace, op, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrIO, op, err)
}
