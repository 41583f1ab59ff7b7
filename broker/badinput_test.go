package broker

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

// frame builds a request frame with a header v1 (or v2 when flexible).
func frame(key, version int16, corr int32, body []byte, flexible bool) []byte {
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if flexible {
		b = append(b, 0)
	}
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func readFrame(t *testing.T, c net.Conn) []byte {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("read response size: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatalf("read response: %v", err)
	}
	return body
}

func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 64)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("connection was not closed")
		}
		return
	}
}

// healthy checks the broker still serves a normal client.
func healthy(t *testing.T, b *testBroker) {
	t.Helper()
	if _, err := b.admin(t).ListBrokers(testCtx(t)); err != nil {
		t.Fatalf("broker unhealthy after bad input: %v", err)
	}
}

func TestOversizedFrameClosesWithoutAllocating(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *Config) { c.MaxRequestBytes = 1 << 20 })
	other := dial(t, b.addr())
	c := dial(t, b.addr())
	c.Write([]byte{0x7f, 0xff, 0xff, 0xff}) // 2 GiB claimed, nothing sent
	expectClosed(t, c)
	c2 := dial(t, b.addr())
	c2.Write(binary.BigEndian.AppendUint32(nil, 1<<20+1))
	expectClosed(t, c2)
	// The other connection is undisturbed.
	other.Write(frame(18, 0, 1, nil, false))
	if resp := readFrame(t, other); binary.BigEndian.Uint32(resp) != 1 {
		t.Fatal("wrong correlation id")
	}
	healthy(t, b)
}

func TestMalformedAndTruncatedFrames(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	for name, raw := range map[string][]byte{
		"tiny":             {0, 0, 0, 3, 1, 2, 3},
		"garbage metadata": append([]byte{0, 0, 0, 14, 0, 3, 0, 9}, 0, 0, 0, 1, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff),
		"negative size":    {0xff, 0xff, 0xff, 0xf0},
	} {
		c := dial(t, b.addr())
		c.Write(raw)
		expectClosed(t, c)
		_ = name
	}
	// A frame cut short: the broker waits for the rest, then the client hangs up.
	c := dial(t, b.addr())
	f := frame(3, 1, 1, []byte{0, 0, 0, 1}, false)
	c.Write(f[:len(f)-2])
	c.Close()
	healthy(t, b)
}

func TestUnknownKeyAndVersion(t *testing.T) {
	b := startBroker(t, t.TempDir(), nil)
	// ApiVersions above our maximum: a v0 answer with UNSUPPORTED_VERSION and the list.
	c := dial(t, b.addr())
	c.Write(frame(18, 99, 5, nil, false))
	resp := readFrame(t, c)
	av := kmsg.NewPtrApiVersionsResponse()
	av.SetVersion(0)
	if err := av.ReadFrom(resp[4:]); err != nil {
		t.Fatal(err)
	}
	if av.ErrorCode != kerr.UnsupportedVersion.Code || len(av.ApiKeys) == 0 {
		t.Fatalf("api versions probe: code %d, %d keys", av.ErrorCode, len(av.ApiKeys))
	}
	// The client can then retry on the same connection.
	c.Write(frame(18, 3, 6, []byte{1, 1, 0}, true))
	resp = readFrame(t, c)
	if binary.BigEndian.Uint32(resp) != 6 {
		t.Fatal("retry not answered")
	}
	for _, kv := range [][2]int16{{9999, 0}, {0, 0}, {3, 99}} {
		c := dial(t, b.addr())
		c.Write(frame(kv[0], kv[1], 9, nil, false))
		resp := readFrame(t, c)
		if code := int16(binary.BigEndian.Uint16(resp[4:])); code != kerr.UnsupportedVersion.Code {
			t.Fatalf("key %d v%d: code %d", kv[0], kv[1], code)
		}
		expectClosed(t, c)
	}
	healthy(t, b)
}

func TestBadBatches(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *Config) { c.AutoCreateTopics = false })
	adm := b.admin(t)
	createTopic(t, adm, "bad", 1, nil)
	small := "100"
	createTopic(t, adm, "small", 1, map[string]*string{"max.message.bytes": &small})
	cl := b.client(t)

	good := makeBatch(-1, -1, -1, []byte("ok"))
	crc := append([]byte(nil), good...)
	crc[len(crc)-1] ^= 0xff
	old := append([]byte(nil), good...)
	old[16] = 1
	for name, tc := range map[string]struct {
		topic string
		batch []byte
		code  int16
	}{
		"bad crc":       {"bad", crc, kerr.CorruptMessage.Code},
		"old magic":     {"bad", old, kerr.UnsupportedForMessageFormat.Code},
		"truncated":     {"bad", good[:30], kerr.CorruptMessage.Code},
		"unknown topic": {"nope", good, kerr.UnknownTopicOrPartition.Code},
		"too large":     {"small", makeBatch(-1, -1, -1, make([]byte, 200)), kerr.MessageTooLarge.Code},
	} {
		if got := rawProduce(t, cl, tc.topic, tc.batch); got.ErrorCode != tc.code {
			t.Errorf("%s: got %v, want %v", name, kerr.ErrorForCode(got.ErrorCode), kerr.ErrorForCode(tc.code))
		}
	}
	// Nothing bad was appended: the good batch lands at offset 0.
	if got := rawProduce(t, cl, "bad", good); got.ErrorCode != 0 || got.BaseOffset != 0 {
		t.Fatalf("good batch: %v at %d", kerr.ErrorForCode(got.ErrorCode), got.BaseOffset)
	}
}

func TestAutoCreateTopic(t *testing.T) {
	b := startBroker(t, t.TempDir(), func(c *Config) { c.DefaultPartitions = 3 })
	cl := b.client(t, kgo.DefaultProduceTopic("autocreated"), kgo.AllowAutoTopicCreation())
	if _, err := cl.ProduceSync(testCtx(t), &kgo.Record{Value: []byte("x")}).First(); err != nil {
		t.Fatal(err)
	}
	td, err := b.admin(t).ListTopics(testCtx(t), "autocreated")
	if err != nil || len(td["autocreated"].Partitions) != 3 {
		t.Fatalf("auto-created topic: %+v %v", td, err)
	}
}
