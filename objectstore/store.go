// Package objectstore is Weir's object storage layer: a small Store interface that the
// uploader, the read path and garbage collection use, and wrappers around any Store:
// Retrying (backoff on transient errors) and Instrumented (Prometheus metrics).
//
// Implementations: localfs (files under a directory, the embedded default) and s3
// (aws-sdk-go-v2: AWS S3, ONTAP S3, MinIO). Every implementation passes the conformance
// suite in objectstore/storetest; objectstore/faulty injects faults for tests.
//
// The usual stack, outermost first:
//
//	Retrying → Instrumented → s3.Store (or localfs.Store)
//
// so that every attempt is counted in the metrics (S3 requests are money) and the
// retry policy is the caller's, not the SDK's.
//
// # Semantics every Store has
//
//   - Keys are validated by ValidateKey (same rules for every store, so a key that
//     works on localfs works on S3 and the reverse): 1 to 1024 bytes of [A-Za-z0-9],
//     '/', and - _ . = , @ ~ ! * ' ( ); '/' separates non-empty segments; no segment is
//     "." or "..". A key must not also be a "directory" of another key ("a" and "a/b"):
//     S3 allows it, localfs cannot, and Weir never needs it.
//   - Put replaces the object atomically: a reader sees the old or the new object whole,
//     never a mix, and a failed or cancelled Put leaves the old one (or none). Weir treats
//     objects as immutable once put.
//   - GetRange(key, offset, length) returns the bytes [offset, min(offset+length, size)).
//     length -1 means to the end. A range that runs past the end is cut short at the end
//     (a short read, no error), like S3; offset == size gives zero bytes; offset > size,
//     a negative offset or length < -1 is ErrInvalidRange. The caller must Close the
//     reader; read errors are mapped to the same sentinels.
//   - Delete of a missing key succeeds.
//   - List returns every object whose key starts with prefix (a plain string prefix, not
//     a directory), sorted by key, pagination hidden.
//   - Every error is wrapped with %w around one of the sentinels below when one applies,
//     or around the context's error when the caller's context ended.
package objectstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Sentinel errors. Test with errors.Is; stores wrap them with %w and add the operation,
// the key and the underlying cause.
var (
	// ErrNotFound: the key does not exist (S3 404 NoSuchKey).
	ErrNotFound = errors.New("objectstore: not found")
	// ErrThrottled: the store asks to slow down (S3 503 SlowDown, 429). Transient.
	ErrThrottled = errors.New("objectstore: throttled")
	// ErrUnavailable: a server error (5xx), a timeout, a reset or refused connection, a
	// truncated response. Transient.
	ErrUnavailable = errors.New("objectstore: unavailable")
	// ErrInvalidRange: offset beyond the end of the object, negative offset, length < -1.
	ErrInvalidRange = errors.New("objectstore: invalid range")
	// ErrInvalidKey: the key (or list prefix) breaks the key rules of ValidateKey.
	ErrInvalidKey = errors.New("objectstore: invalid key")
	// ErrMismatch: the stored object is not the one put (Verify). Not transient: the
	// caller puts the data again under a new key.
	ErrMismatch = errors.New("objectstore: stored object differs from the one put")
)

// IsTransient reports whether err is worth retrying: ErrThrottled or ErrUnavailable.
func IsTransient(err error) bool {
	return errors.Is(err, ErrThrottled) || errors.Is(err, ErrUnavailable)
}

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key  string
	Size int64
	// LastModified is when the object was put, as the store reports it (second
	// precision on S3). Garbage collection uses it to age orphans.
	LastModified time.Time
}

// Store is an object store. All methods are safe for concurrent use.
type Store interface {
	// Put stores exactly size bytes read from body under key, replacing any object
	// there. It fails (and stores nothing) if body holds fewer or more than size bytes.
	// A body that implements io.Seeker (bytes.Reader, *os.File, io.SectionReader) can
	// be rewound: Retrying retries only such bodies, and the s3 store streams them
	// instead of buffering them in memory. Put reads body from its current position.
	Put(ctx context.Context, key string, body io.Reader, size int64) error
	// GetRange opens bytes [offset, offset+length) of the object; length -1 reads to
	// the end. See the package doc for ranges past the end. The reader stays bound to
	// ctx: when ctx ends, its reads fail.
	GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	// Head returns the object's size and modification time.
	Head(ctx context.Context, key string) (ObjectInfo, error)
	// Delete removes the object; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List returns the objects whose keys start with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
}

// ReadRange reads a whole range into memory: GetRange, io.ReadAll, Close.
func ReadRange(ctx context.Context, s Store, key string, offset, length int64) ([]byte, error) {
	rc, err := s.GetRange(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if length < 0 || length > 1<<30 {
		return io.ReadAll(rc)
	}
	buf := make([]byte, length)
	n := 0
	for n < len(buf) {
		m, err := rc.Read(buf[n:])
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return buf[:n], nil
}

// Verify checks, after a Put that succeeded, that key holds an object of size bytes (a
// HEAD). The content itself is checked on the way in: the s3 store sends Content-MD5, so
// the server refuses a body that is not the one written. Together with never reusing a
// key for other bytes, this is what lets a caller commit the object (and drop its own
// copy of the data): a mismatch (ErrMismatch) or a HEAD that fails means the object
// cannot be trusted, and the data goes again under a new key.
func Verify(ctx context.Context, s Store, key string, size int64) error {
	info, err := s.Head(ctx, key)
	if err != nil {
		return fmt.Errorf("objectstore: verifying %q: %w", key, err)
	}
	if info.Size != size {
		return fmt.Errorf("objectstore: verifying %q: %d bytes stored, %d put: %w", key, info.Size, size, ErrMismatch)
	}
	return nil
}

// CheckRange validates the arguments of GetRange that can be checked without the
// object's size: offset >= 0 and length >= -1.
func CheckRange(offset, length int64) error {
	if offset < 0 || length < -1 {
		return fmt.Errorf("offset %d length %d: %w", offset, length, ErrInvalidRange)
	}
	return nil
}

// ClipRange returns how many bytes GetRange(offset, length) yields on an object of the
// given size, or ErrInvalidRange.
func ClipRange(offset, length, size int64) (int64, error) {
	if err := CheckRange(offset, length); err != nil {
		return 0, err
	}
	if offset > size {
		return 0, fmt.Errorf("offset %d beyond size %d: %w", offset, size, ErrInvalidRange)
	}
	n := size - offset
	if length >= 0 && length < n {
		n = length
	}
	return n, nil
}

const maxKeyLen = 1024

// ValidateKey checks key against the rules in the package doc.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("empty key: %w", ErrInvalidKey)
	}
	if len(key) > maxKeyLen {
		return fmt.Errorf("key of %d bytes (max %d): %w", len(key), maxKeyLen, ErrInvalidKey)
	}
	return checkSegments(key, true)
}

// ValidatePrefix checks a List prefix: "" or the start of a valid key (it may end with
// '/' or in the middle of a segment).
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if len(prefix) > maxKeyLen {
		return fmt.Errorf("prefix of %d bytes: %w", len(prefix), ErrInvalidKey)
	}
	return checkSegments(prefix, false)
}

// checkSegments validates characters and segments. With whole=false the last segment
// may be empty or partial (a prefix), so only complete segments must be valid.
func checkSegments(s string, whole bool) error {
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '/' {
			if !keyChar(s[i]) {
				return fmt.Errorf("key %q: character %q not allowed: %w", s, s[i], ErrInvalidKey)
			}
			continue
		}
		seg := s[start:i]
		last := i == len(s)
		if !last || whole {
			switch seg {
			case "":
				return fmt.Errorf("key %q: empty segment: %w", s, ErrInvalidKey)
			case ".", "..":
				return fmt.Errorf("key %q: %q segment: %w", s, seg, ErrInvalidKey)
			}
		}
		start = i + 1
	}
	return nil
}

func keyChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '-', '_', '.', '=', ',', '@', '~', '!', '*', '\'', '(', ')':
		return true
	}
	return false
}

// Outcome names an operation's result for metrics and logs: "ok", "not_found",
// "throttled", "unavailable", "invalid_range", "invalid_key", "canceled" (the caller's
// context ended) or "error" (anything else: configuration, permissions, bugs).
func Outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrThrottled):
		return "throttled"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	case errors.Is(err, ErrInvalidRange):
		return "invalid_range"
	case errors.Is(err, ErrInvalidKey):
		return "invalid_key"
	}
	return "error"
}
