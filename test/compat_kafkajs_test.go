package test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKafkajsCompat runs test/kafkajs/compat.js (kafkajs pinned in package.json and
// package-lock.json) with node against a weir broker process: admin describeCluster,
// createTopics and metadata; a plain and an idempotent acks=-1 producer with dense
// per-partition base offsets; a group consumer reading everything from the beginning;
// and a group that commits (autoCommit, then commitOffsets) and resumes after its
// committed offsets. The script's header lists every assertion. It skips when node or npm
// is missing unless WEIR_REQUIRE_KAFKAJS is set.
func TestKafkajsCompat(t *testing.T) {
	// Not parallel: a busy broker still loading its offsets partition answers JoinGroup
	// with COORDINATOR_LOAD_IN_PROGRESS, which kafkajs reports as a consumer crash and
	// restarts from; compat.js lets that pass only before any record was read.
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
	for _, f := range []string{"package.json", "package-lock.json", "compat.js"} {
		b, err := os.ReadFile(filepath.Join("kafkajs", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "npm_config_update_notifier=false", "KAFKAJS_NO_PARTITIONER_WARNING=1")
	start := time.Now()
	install := exec.CommandContext(ctxT(t, 5*time.Minute), npm, "ci", "--no-audit", "--no-fund")
	install.Dir, install.Env = work, env
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	t.Logf("npm ci took %v", time.Since(start).Round(time.Millisecond))

	b := startCompatBroker(t)
	start = time.Now()
	cmd := exec.CommandContext(ctxT(t, 2*time.Minute), node, "compat.js", b.bootstrap)
	cmd.Dir, cmd.Env = work, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if werr := os.WriteFile(filepath.Join(b.dir, "kafkajs.log"), out.Bytes(), 0o644); werr != nil {
		t.Log(werr)
	}
	if err != nil {
		t.Fatalf("node compat.js %s: %v\n%s", b.bootstrap, err, out.String())
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "step ") || strings.HasPrefix(l, "OK ") {
			t.Log(l)
		}
	}
	t.Logf("node compat.js took %v; API versions on the wire: %s", time.Since(start).Round(time.Millisecond), b.wire.summary())
	b.wire.checkAllAcks(t)
	if _, idem := b.wire.produceStats(); idem == 0 {
		t.Errorf("the idempotent producer sent no batch with a producer ID")
	}
}
