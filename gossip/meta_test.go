package gossip

import (
	"bytes"
	"log/slog"
	"math"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
)

func TestMetaRoundTrip(t *testing.T) {
	for _, m := range []Member{
		{BrokerID: 0, KafkaAddr: "a:1"},
		{BrokerID: 1, Zone: "us-east-1a", KafkaAddr: "10.0.0.1:9092", Epoch: 1},
		{BrokerID: math.MaxInt32, Zone: strings.Repeat("z", MaxZoneLen), KafkaAddr: strings.Repeat("h", MaxKafkaAddrLen-6) + ":65535", Epoch: math.MaxInt64},
		{BrokerID: 7, Zone: "zöne", KafkaAddr: "[::1]:9092", Epoch: 1 << 40},
	} {
		b, err := encodeMeta(m)
		if err != nil {
			t.Fatalf("encode %v: %v", m, err)
		}
		if len(b) > memberlist.MetaMaxSize {
			t.Fatalf("%d bytes exceed the limit", len(b))
		}
		got, err := decodeMeta(b)
		if err != nil || got != m {
			t.Fatalf("decode(encode(%v)) = %v, %v", m, got, err)
		}
	}
	// A typical member is small.
	b, _ := encodeMeta(Member{BrokerID: 12, Zone: "eu-west-1b", KafkaAddr: "broker-12.weir.svc:9092", Epoch: 123456})
	t.Logf("typical metadata: %d bytes", len(b))
}

func TestMetaForwardCompatible(t *testing.T) {
	m := Member{BrokerID: 3, Zone: "b", KafkaAddr: "h:9", Epoch: 2}
	b, _ := encodeMeta(m)
	b[1] = 2                             // a later version ...
	b = append(b, 0x01, 0x02, 0x03, 'x') // ... with extra fields
	got, err := decodeMeta(b)
	if err != nil || got != m {
		t.Fatalf("decode newer version = %v, %v", got, err)
	}
}

func TestMetaRejects(t *testing.T) {
	valid, _ := encodeMeta(Member{BrokerID: 3, Zone: "b", KafkaAddr: "h:9", Epoch: 2})
	long := append([]byte{'W', 1, 1, 1}, make([]byte, 600)...)
	for name, b := range map[string][]byte{
		"nil":          nil,
		"one byte":     {'W'},
		"bad magic":    append([]byte{'X'}, valid[1:]...),
		"version 0":    append([]byte{'W', 0}, valid[2:]...),
		"truncated":    valid[:len(valid)-1],
		"bad varint":   {'W', 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"id too big":   {'W', 1, 0x80, 0x80, 0x80, 0x80, 0x08, 0, 0, 3, 'h', ':', '9'},
		"epoch > i64":  {'W', 1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 3, 'h', ':', '9'},
		"zone too big": {'W', 1, 1, 1, 0xff, 0x01},
		"no addr":      {'W', 1, 1, 1, 0, 0},
		"addr no port": {'W', 1, 1, 1, 0, 1, 'h'},
		"bad utf8":     {'W', 1, 1, 1, 1, 0xff, 3, 'h', ':', '9'},
		"oversized":    long,
		"json":         []byte(`{"id":1,"zone":"a","addr":"h:1","epoch":1}`),
	} {
		if m, err := decodeMeta(b); err == nil {
			t.Errorf("%s: decoded %v", name, m)
		}
	}
}

func TestEncodeMetaRejectsBadMember(t *testing.T) {
	for _, m := range []Member{
		{BrokerID: -1, KafkaAddr: "h:1"},
		{BrokerID: 1, KafkaAddr: "h:1", Epoch: -1},
		{BrokerID: 1, KafkaAddr: ""},
		{BrokerID: 1, KafkaAddr: "h"},
		{BrokerID: 1, KafkaAddr: "h:0"},
		{BrokerID: 1, KafkaAddr: ":9092"},
		{BrokerID: 1, KafkaAddr: "h:1", Zone: strings.Repeat("z", MaxZoneLen+1)},
		{BrokerID: 1, KafkaAddr: strings.Repeat("h", MaxKafkaAddrLen) + ":1"},
	} {
		if _, err := encodeMeta(m); err == nil {
			t.Errorf("encodeMeta(%+v) succeeded", m)
		}
	}
}

func TestNodeName(t *testing.T) {
	for _, id := range []int32{0, 1, 42, math.MaxInt32} {
		got, ok := brokerIDFromName(nodeName(id))
		if !ok || got != id {
			t.Fatalf("round trip of %d: %d %v", id, got, ok)
		}
	}
	for _, name := range []string{"", "broker-", "broker--1", "broker-01", "broker-x", "broker-2147483648", "node-1", "broker-1 "} {
		if id, ok := brokerIDFromName(name); ok {
			t.Errorf("%q parsed as %d", name, id)
		}
	}
}

func FuzzDecodeMeta(f *testing.F) {
	valid, _ := encodeMeta(Member{BrokerID: 3, Zone: "us-east-1a", KafkaAddr: "10.1.2.3:9092", Epoch: 99})
	f.Add(valid)
	f.Add([]byte{})
	f.Add([]byte("W\x01"))
	f.Add([]byte{'W', 1, 9, 1, 200, 1, 'x'})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to something that decodes the same.
		again, err := encodeMeta(m)
		if err != nil {
			t.Fatalf("decoded %v does not re-encode: %v", m, err)
		}
		m2, err := decodeMeta(again)
		if err != nil || m2 != m {
			t.Fatalf("re-decode: %v %v", m2, err)
		}
	})
}

func TestParseMemberlistLine(t *testing.T) {
	for _, c := range []struct {
		in    string
		level slog.Level
		msg   string
	}{
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:1", slog.LevelDebug, "Stream connection from=127.0.0.1:1"},
		{"[INFO] memberlist: Marking broker-2 as failed", slog.LevelInfo, "Marking broker-2 as failed"},
		{"[WARN] memberlist: Was able to connect", slog.LevelWarn, "Was able to connect"},
		{"[ERR] memberlist: Conflicting address", slog.LevelError, "Conflicting address"},
		{"[ERR] Failed to shutdown transport", slog.LevelError, "Failed to shutdown transport"},
		{"[WARN] memberlist: ignoring alive message for 'x': bad", slog.LevelDebug, "ignoring alive message for 'x': bad"},
		{"no level", slog.LevelInfo, "no level"},
	} {
		level, msg := parseMemberlistLine(c.in)
		if level != c.level || msg != c.msg {
			t.Errorf("%q → %v %q", c.in, level, msg)
		}
	}
}

func TestSlogWriter(t *testing.T) {
	var buf bytes.Buffer
	l := newMemberlistLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	l.Printf("[DEBUG] memberlist: hidden")
	l.Printf("[WARN] memberlist: shown %d", 1)
	out := buf.String()
	if strings.Contains(out, "hidden") || !strings.Contains(out, "level=WARN") || !strings.Contains(out, `msg="shown 1"`) {
		t.Fatalf("log output %q", out)
	}
	newMemberlistLogger(nil).Printf("[ERR] discarded")
}
