package cluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/weir-io/weir/internal/testutil"
)

// kafkajs, with the settings docs/CLIENTS.md recommends, produces through three graceful
// moves of its partition (test/kafkajs/moves.js: an idempotent producer, one record at a
// time): no send fails (a refusal kafkajs does not retry would end the script with
// FAIL), every ack is at the next offset, and the log ends where the acks do. kafkajs
// (Produce v7) has no KIP-951: it refreshes its metadata on NOT_LEADER_OR_FOLLOWER. It
// skips when node or npm is missing unless WEIR_REQUIRE_KAFKAJS is set.
func TestKafkajsProducesThroughMoves(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster test")
	}
	node, nerr := exec.LookPath("node")
	npm, perr := exec.LookPath("npm")
	if nerr != nil || perr != nil {
		if os.Getenv("WEIR_REQUIRE_KAFKAJS") != "" {
			t.Fatalf("node and npm are required (WEIR_REQUIRE_KAFKAJS): node: %v, npm: %v", nerr, perr)
		}
		t.Skip("node or npm not installed")
	}
	// npm ci in a temp copy, so the source tree gets no node_modules.
	work := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "moves.js"} {
		b, err := os.ReadFile(filepath.Join("..", "test", "kafkajs", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "npm_config_update_notifier=false", "KAFKAJS_NO_PARTITIONER_WARNING=1")
	install := exec.CommandContext(ctxFor(t, 5*time.Minute), npm, "ci", "--no-audit", "--no-fund")
	install.Dir, install.Env = work, env
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}

	c := startCluster(t, noBalancer)
	if err := createTopic(t, kadm.NewClient(newClient(t, c)), 1, "jsmoves"); err != nil {
		t.Fatal(err)
	}
	tp := waitTopic(t, c, "jsmoves")

	cmd := exec.CommandContext(ctxFor(t, 2*time.Minute), node, "moves.js", c.Bootstrap(), "jsmoves")
	cmd.Dir, cmd.Env = work, env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out lineLog
	var reader sync.WaitGroup
	reader.Add(1)
	go func() { defer reader.Done(); out.read(stdout) }()
	acks := func() int {
		got, _ := out.since(0, "ack ")
		if fail, _ := out.since(0, "FAIL"); len(fail) > 0 {
			t.Fatalf("kafkajs: %s\n%s", fail[0], stderr.String())
		}
		return len(got)
	}
	testutil.Eventually(t, 60*time.Second, "kafkajs producing", func() bool { return acks() > 20 })
	leader := tp.Partitions[0].Leader
	for round := 0; round < 3; round++ {
		to := leader%3 + 1
		movePartition(t, c, leader, tp, 0, to)
		leader = to
		mark := acks()
		testutil.Eventually(t, 30*time.Second, "kafkajs acks after the move", func() bool { return acks() > mark+20 })
	}
	stdin.Write([]byte("stop\n"))
	stdin.Close()
	reader.Wait() // the pipe is read to its end before Wait closes it
	werr := cmd.Wait()
	all, _ := out.since(0, "")
	if werr != nil {
		t.Fatalf("node moves.js: %v\n%s\n%s", werr, strings.Join(all[max(0, len(all)-20):], "\n"), stderr.String())
	}
	lines, _ := out.since(0, "ack ")
	var longest int
	for i, l := range lines {
		var n, ms int
		var off int64
		if _, err := fmt.Sscanf(l, "ack %d %d %d", &n, &off, &ms); err != nil || n != i+1 || off != int64(i) {
			t.Fatalf("line %q: want ack %d at offset %d", l, i+1, i)
		}
		longest = max(longest, ms)
	}
	if ok, _ := out.since(0, "OK "); len(ok) != 1 || ok[0] != "OK "+strconv.Itoa(len(lines)) {
		t.Fatalf("kafkajs ended with %v after %d acks", ok, len(lines))
	}
	t.Logf("kafkajs: %d records acked through 3 moves; longest send %d ms", len(lines), longest)
	ends := endOffsets(t, kadm.NewClient(newClient(t, c)), "jsmoves")
	if end, _ := ends.Lookup("jsmoves", 0); end.Offset != int64(len(lines)) {
		t.Fatalf("the log ends at %d, %d records were acked", end.Offset, len(lines))
	}
}
