package objfmt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/weir-io/weir/internal/crc32c"
)

const (
	// FooterSize is the length of the footer at the end of every object.
	FooterSize = 36
	// Version is the format version this package writes and reads.
	Version = 1
	// DefaultTailSize is a good size for the first ranged GET of an object (its last
	// bytes): it holds the footer and, for objects of up to a few hundred partitions,
	// the index too.
	DefaultTailSize = 64 << 10
	// MaxIndexLen bounds the index a reader accepts (and so allocates): about 1.4
	// million blocks, or 2.7 million single-block partitions.
	MaxIndexLen = 64 << 20
	// maxDataLen bounds IndexPos so that sizes and positions never overflow an int64.
	maxDataLen = 1 << 50
)

const magic = "WEIR-OBJ"

var (
	// ErrCorrupt reports bytes that are not a valid object, index, block or batch: a bad
	// magic, a checksum mismatch, or inconsistent lengths and offsets.
	ErrCorrupt = errors.New("objfmt: corrupt object")
	// ErrVersion reports a footer of a format version (or flags) this package does not know.
	ErrVersion = errors.New("objfmt: unsupported object format version")
)

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// Footer is the decoded fixed-size footer of an object.
type Footer struct {
	Version  uint32
	Flags    uint32 // FlagSparse or 0
	IndexPos int64  // where the index starts; also the length of the data region
	IndexLen int64  // length of the index in bytes
	IndexCRC uint32 // CRC32C of the index bytes
}

// FlagSparse marks an object whose partitions' runs may have gaps between batches: a
// compacted range (offsets sparse, still strictly increasing). Readers that predate it
// refuse the object (ErrVersion), as they must: they would call the gaps corruption.
const FlagSparse uint32 = 1

// knownFlags are the footer flags this build reads.
const knownFlags = FlagSparse

// Sparse reports whether the object may have gaps between a partition's batches.
func (f Footer) Sparse() bool { return f.Flags&FlagSparse != 0 }

// ObjectSize is the size of the whole object the footer belongs to.
func (f Footer) ObjectSize() int64 { return f.IndexPos + f.IndexLen + FooterSize }

// IndexRange is the byte range of the index in the object: offset and length.
func (f Footer) IndexRange() (off, n int64) { return f.IndexPos, f.IndexLen }

// appendFooter encodes f (with the current Version and f's flags) after dst.
func appendFooter(dst []byte, f Footer) []byte {
	start := len(dst)
	dst = append(dst, magic...)
	dst = binary.LittleEndian.AppendUint32(dst, Version)
	dst = binary.LittleEndian.AppendUint32(dst, f.Flags)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(f.IndexPos))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(f.IndexLen))
	dst = binary.LittleEndian.AppendUint32(dst, f.IndexCRC)
	return binary.LittleEndian.AppendUint32(dst, crc32c.Checksum(dst[start:]))
}

// ParseFooter decodes the footer in the last FooterSize bytes of b, so b may be the
// footer alone or any tail of the object.
func ParseFooter(b []byte) (Footer, error) {
	var f Footer
	if len(b) < FooterSize {
		return f, corruptf("footer needs %d bytes, have %d", FooterSize, len(b))
	}
	b = b[len(b)-FooterSize:]
	if string(b[:8]) != magic {
		return f, corruptf("bad footer magic %q", b[:8])
	}
	if got, want := crc32c.Checksum(b[:32]), binary.LittleEndian.Uint32(b[32:]); got != want {
		return f, corruptf("footer checksum %08x, stored %08x", got, want)
	}
	f.Version = binary.LittleEndian.Uint32(b[8:])
	if f.Version != Version {
		return f, fmt.Errorf("%w: %d (this build reads %d)", ErrVersion, f.Version, Version)
	}
	f.Flags = binary.LittleEndian.Uint32(b[12:])
	if f.Flags&^knownFlags != 0 {
		return f, fmt.Errorf("%w: unknown flags %#x", ErrVersion, f.Flags)
	}
	pos := binary.LittleEndian.Uint64(b[16:])
	n := binary.LittleEndian.Uint32(b[24:])
	if pos > maxDataLen {
		return f, corruptf("index position %d out of range", pos)
	}
	if n < indexHeaderLen || n > MaxIndexLen {
		return f, corruptf("index length %d out of range [%d, %d]", n, indexHeaderLen, MaxIndexLen)
	}
	f.IndexPos, f.IndexLen = int64(pos), int64(n)
	f.IndexCRC = binary.LittleEndian.Uint32(b[28:])
	return f, nil
}

// ParseTail decodes the footer at the end of tail, the last len(tail) bytes of an object
// (a GET of bytes=-DefaultTailSize, or the whole object), and the index too when tail
// holds all of it. idx is nil (and err nil) when the index starts before tail: then GET
// f.IndexRange() and call ParseIndex.
func ParseTail(tail []byte) (f Footer, idx *Index, err error) {
	f, err = ParseFooter(tail)
	if err != nil {
		return f, nil, err
	}
	if int64(len(tail)) < f.IndexLen+FooterSize {
		return f, nil, nil
	}
	end := int64(len(tail)) - FooterSize
	idx, err = ParseIndex(tail[end-f.IndexLen:end], f)
	return f, idx, err
}
