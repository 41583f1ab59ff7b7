package gossip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/memberlist"
)

// Node metadata wire format (memberlist carries it in every alive message, so it is
// kept small; memberlist.MetaMaxSize = 512 bytes is the hard limit):
//
//	byte 0    metaMagic ('W')
//	byte 1    format version (metaVersion = 1)
//	uvarint   broker id      (0 ≤ id ≤ MaxInt32)
//	uvarint   broker epoch   (0 ≤ epoch ≤ MaxInt64)
//	uvarint   len(zone), zone bytes (UTF-8)
//	uvarint   len(kafka addr), kafka addr bytes (host:port)
//
// A later version may only append fields: a decoder accepts any version ≥ 1 and ignores
// bytes after the fields it knows, so old and new brokers can share a cluster.
const (
	metaMagic   = 'W'
	metaVersion = 1

	// MaxZoneLen and MaxKafkaAddrLen bound the variable-size fields so that the
	// metadata always fits memberlist's limit (memberlist.MetaMaxSize).
	MaxZoneLen      = 128
	MaxKafkaAddrLen = 255
)

// nodeNamePrefix + broker id is the memberlist node name: names must be unique in a
// cluster, so memberlist itself detects two processes that claim one broker id, and a
// restarted broker takes over its old name (with a higher incarnation).
const nodeNamePrefix = "broker-"

func nodeName(id int32) string { return nodeNamePrefix + strconv.FormatInt(int64(id), 10) }

// brokerIDFromName parses a memberlist node name made by nodeName.
func brokerIDFromName(name string) (int32, bool) {
	s, ok := strings.CutPrefix(name, nodeNamePrefix)
	if !ok || s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	id, err := strconv.ParseInt(s, 10, 32)
	if err != nil || id < 0 {
		return 0, false
	}
	return int32(id), true
}

var errMetaTooLarge = fmt.Errorf("gossip: node metadata exceeds memberlist limit of %d bytes", memberlist.MetaMaxSize)

// encodeMeta serializes m. It fails if a field is out of range or the result would not
// fit in memberlist's metadata limit.
func encodeMeta(m Member) ([]byte, error) {
	if err := checkMember(m); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, 2+binary.MaxVarintLen32+binary.MaxVarintLen64+2*binary.MaxVarintLen16+len(m.Zone)+len(m.KafkaAddr))
	buf = append(buf, metaMagic, metaVersion)
	buf = binary.AppendUvarint(buf, uint64(m.BrokerID))
	buf = binary.AppendUvarint(buf, uint64(m.Epoch))
	buf = binary.AppendUvarint(buf, uint64(len(m.Zone)))
	buf = append(buf, m.Zone...)
	buf = binary.AppendUvarint(buf, uint64(len(m.KafkaAddr)))
	buf = append(buf, m.KafkaAddr...)
	if len(buf) > memberlist.MetaMaxSize {
		return nil, errMetaTooLarge
	}
	return buf, nil
}

// decodeMeta parses metadata received from a peer. It never panics; any malformed
// input yields an error.
func decodeMeta(b []byte) (Member, error) {
	var m Member
	if len(b) < 2 {
		return m, errors.New("gossip: metadata too short")
	}
	if len(b) > memberlist.MetaMaxSize {
		return m, errMetaTooLarge
	}
	if b[0] != metaMagic {
		return m, fmt.Errorf("gossip: metadata has bad magic byte %#x", b[0])
	}
	if b[1] < 1 {
		return m, fmt.Errorf("gossip: metadata has unknown version %d", b[1])
	}
	r := metaReader{b: b[2:]}
	id := r.uvarint()
	epoch := r.uvarint()
	zone := r.bytes(MaxZoneLen)
	addr := r.bytes(MaxKafkaAddrLen)
	if r.err != nil {
		return m, r.err
	}
	if id > math.MaxInt32 {
		return m, fmt.Errorf("gossip: metadata broker id %d out of range", id)
	}
	if epoch > math.MaxInt64 {
		return m, fmt.Errorf("gossip: metadata epoch %d out of range", epoch)
	}
	m = Member{BrokerID: int32(id), Epoch: int64(epoch), Zone: string(zone), KafkaAddr: string(addr)}
	if err := checkMember(m); err != nil {
		return Member{}, err
	}
	return m, nil
}

// checkMember validates the fields a member announces.
func checkMember(m Member) error {
	if m.BrokerID < 0 {
		return fmt.Errorf("gossip: broker id %d is negative", m.BrokerID)
	}
	if m.Epoch < 0 {
		return fmt.Errorf("gossip: broker epoch %d is negative", m.Epoch)
	}
	if len(m.Zone) > MaxZoneLen {
		return fmt.Errorf("gossip: zone is %d bytes, the limit is %d", len(m.Zone), MaxZoneLen)
	}
	if !utf8.ValidString(m.Zone) {
		return errors.New("gossip: zone is not valid UTF-8")
	}
	if len(m.KafkaAddr) > MaxKafkaAddrLen {
		return fmt.Errorf("gossip: kafka address is %d bytes, the limit is %d", len(m.KafkaAddr), MaxKafkaAddrLen)
	}
	if err := checkHostPort(m.KafkaAddr, false); err != nil {
		return fmt.Errorf("gossip: kafka address: %w", err)
	}
	return nil
}

// checkHostPort checks that s is host:port with a non-empty host and a valid port
// (port 0 only when allowZero).
func checkHostPort(s string, allowZero bool) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return err
	}
	if host == "" {
		return fmt.Errorf("%q has no host", s)
	}
	if !utf8.ValidString(host) {
		return fmt.Errorf("%q: host is not valid UTF-8", s)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fmt.Errorf("%q has a bad port", s)
	}
	if p == 0 && !allowZero {
		return fmt.Errorf("%q has port 0", s)
	}
	return nil
}

type metaReader struct {
	b   []byte
	err error
}

func (r *metaReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errors.New("gossip: metadata truncated or has a bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *metaReader) bytes(max int) []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(max) {
		r.err = fmt.Errorf("gossip: metadata field of %d bytes exceeds %d", n, max)
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errors.New("gossip: metadata truncated")
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
