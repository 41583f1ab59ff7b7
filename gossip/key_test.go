package gossip

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weir-io/weir/internal/testutil"
)

var (
	keyA = []byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
	keyB = []byte("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
)

// TestEncryptedGossip: members sharing a key form a ring; a member with another key,
// or none, never joins it (each side drops what it cannot decrypt or what is not
// encrypted), however long it retries; during a key rotation members holding both keys
// join whichever one the others send with.
func TestEncryptedGossip(t *testing.T) {
	withKeys := func(cfg Config, primary []byte, old ...[]byte) Config {
		cfg.SecretKey, cfg.OldKeys = primary, old
		return cfg
	}
	n1 := startNode(t, withKeys(testConfig(1, 1, "127.0.0.1:0"), keyA, keyB))
	n2 := startNode(t, withKeys(testConfig(2, 1, "127.0.0.1:0", n1.g.Addr()), keyA))
	// Mid-rotation: sends with B, still accepts A.
	n3 := startNode(t, withKeys(testConfig(3, 1, "127.0.0.1:0", n1.g.Addr()), keyB, keyA))
	waitConverged(t, []*testNode{n1, n3}, 3)
	testutil.Eventually(t, convergeTimeout, "broker 2 sees all three", func() bool { return len(n2.g.Members()) == 3 })

	wrong := startNode(t, withKeys(testConfig(4, 1, "127.0.0.1:0", n2.g.Addr()), []byte("cccccccccccccccccccccccccccccccc")))
	plain := startNode(t, testConfig(5, 1, "127.0.0.1:0", n2.g.Addr()))
	// Wait until both outsiders have failed to join several times.
	testutil.Eventually(t, 30*time.Second, "outsiders' join attempts failed", func() bool {
		return metricValue(t, wrong.reg, "weir_gossip_join_failures_total") >= 3 && metricValue(t, plain.reg, "weir_gossip_join_failures_total") >= 3
	})
	// Only outsiders are looked for: on a loaded machine, real timers may have a ring
	// member suspected and back for a while, which is not this test's business.
	for _, n := range []*testNode{n1, n2, n3} {
		for _, m := range n.g.Members() {
			if m.BrokerID > 3 {
				t.Errorf("broker %d lists outsider %v", n.cfg.BrokerID, m)
			}
		}
		if e, ok := n.rec.find(func(m Member) bool { return m.BrokerID > 3 }, "join", "update"); ok {
			t.Errorf("broker %d saw %v", n.cfg.BrokerID, e)
		}
	}
	for _, n := range []*testNode{wrong, plain} {
		if got := len(n.g.Members()); got != 1 {
			t.Errorf("outsider %d sees %d members, want only itself", n.cfg.BrokerID, got)
		}
	}
}

func TestLoadKeyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	k16 := bytes.Repeat([]byte{0xfe}, 16)
	p := write("two", "# rotation\n"+base64.StdEncoding.EncodeToString(keyA)+"\n\n"+base64.RawURLEncoding.EncodeToString(k16)+"\n")
	keys, err := LoadKeyFile(p)
	if err != nil || len(keys) != 2 || !bytes.Equal(keys[0], keyA) || !bytes.Equal(keys[1], k16) {
		t.Fatalf("two keys: %x %v", keys, err)
	}
	raw := string(bytes.Repeat([]byte{0x01, 0xff}, 12)) // 24 raw bytes, not text
	if keys, err := LoadKeyFile(write("raw", raw)); err != nil || len(keys) != 1 || len(keys[0]) != 24 {
		t.Fatalf("raw key: %x %v", keys, err)
	}
	secret := base64.StdEncoding.EncodeToString([]byte("only-twenty-bytes-ab"))
	for name, content := range map[string]string{
		"wrong size": secret + "\n",
		"not base64": "this is not base64 !!!\n",
		"empty":      "# nothing\n",
	} {
		_, err := LoadKeyFile(write(strings.ReplaceAll(name, " ", "-"), content))
		if err == nil {
			t.Errorf("%s: loaded", name)
		} else if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error shows the key: %v", name, err)
		}
	}
	if _, err := LoadKeyFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file loaded")
	}
	cfg := testConfig(1, 1, "127.0.0.1:0")
	cfg.OldKeys = [][]byte{[]byte("short")}
	cfg.SecretKey = keyA
	if err := cfg.Validate(); err == nil {
		t.Error("an old key of 5 bytes validated")
	}
}
