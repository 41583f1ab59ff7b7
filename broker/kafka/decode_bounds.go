package kafka

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Decoding bounds. kmsg refuses an array whose claimed count could not fit in the bytes
// left at a minimum per element (2 bytes for a Produce topic, 6 for a partition), but it
// allocates the whole array before reading an element, and a decoded element is far
// larger than its minimum encoding (a ProduceRequestTopic is ~100 bytes). So a 100 MiB
// Produce claiming 52 M topics made the broker allocate ~5 GB before failing (issue 20,
// item 3). Before login nothing but ApiVersions and the SASL requests is decoded
// (sasl_preauth.go); on listeners without SASL every client may send Produce, so its
// shape is checked first, without allocating: checkProduceShape walks the request,
// skipping strings and record bytes, and refuses one whose decoded topics and partitions
// would take more memory than the frame itself plus 1 MiB. A real Produce carries a
// record batch (at least 61 bytes) per partition and is far below that.

var errDecodeBound = errors.New("kafka: request would decode to more memory than its size allows")

const (
	produceTopicSize     = int64(unsafe.Sizeof(kmsg.ProduceRequestTopic{}))
	producePartitionSize = int64(unsafe.Sizeof(kmsg.ProduceRequestTopicPartition{}))
	decodeSlack          = 1 << 20
)

// checkProduceShape checks a Produce body (after the header) of a version the broker
// serves (3-11; flexible from 9).
func checkProduceShape(version int16, body []byte) error {
	flex := version >= 9
	r := kbin.Reader{Src: body}
	limit := int64(len(body)) + decodeSlack
	skipString(&r, flex) // transactional id
	r.Int16()            // acks
	r.Int32()            // timeout
	cost := int64(0)
	topics := arrayLen(&r, flex)
	for i := int64(0); i < topics && r.Ok(); i++ {
		if cost += produceTopicSize; cost > limit {
			break
		}
		skipString(&r, flex) // topic name
		parts := arrayLen(&r, flex)
		for j := int64(0); j < parts && r.Ok(); j++ {
			if cost += producePartitionSize; cost > limit {
				break
			}
			r.Int32() // partition
			skipBytes(&r, flex)
			if flex {
				kmsg.SkipTags(&r)
			}
		}
		if flex {
			kmsg.SkipTags(&r)
		}
	}
	if cost > limit {
		return fmt.Errorf("%w: a %d-byte Produce claims more than %d bytes of topics and partitions", errDecodeBound, len(body), limit)
	}
	return nil // a truncated body is left to kmsg, which refuses it
}

// arrayLen reads an array length (a null array is empty).
func arrayLen(r *kbin.Reader, flex bool) int64 {
	if flex {
		return max(int64(r.Uvarint())-1, 0)
	}
	return max(int64(r.Int32()), 0)
}

// skipString skips a (nullable) string.
func skipString(r *kbin.Reader, flex bool) {
	n := 0
	if flex {
		n = int(r.Uvarint()) - 1
	} else {
		n = int(r.Int16())
	}
	if n > 0 {
		r.Span(n)
	}
}

// skipBytes skips (nullable) bytes.
func skipBytes(r *kbin.Reader, flex bool) {
	n := 0
	if flex {
		n = int(r.Uvarint()) - 1
	} else {
		n = int(r.Int32())
	}
	if n > 0 {
		r.Span(n)
	}
}
