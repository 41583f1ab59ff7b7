package test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// kcat exercises librdkafka, a second client implementation: metadata, an idempotent
// acks=all producer, a plain consumer and a balanced (-G) group consumer.
func TestKcatSmoke(t *testing.T) {
	// One standalone broker process of its own, light on the CPU: runs beside the
	// package's other parallel tests, after the cluster tests (see proc_test.go).
	t.Parallel()
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("WEIR_REQUIRE_KCAT") != "" {
			t.Fatal("kcat is required (WEIR_REQUIRE_KCAT) but not installed")
		}
		t.Skip("kcat not installed")
	}
	p := startWeir(t, t.TempDir(), "")
	run := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctxT(t, 90e9), kcat, append([]string{"-b", p.addr}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("kcat %v: %v\nstdout: %s\nstderr: %s", args, err, out.String(), errb.String())
		}
		return out.String()
	}

	if out := run("", "-L"); !strings.Contains(out, "1 brokers:") {
		t.Fatalf("kcat -L:\n%s", out)
	}
	var lines []string
	for i := 0; i < 100; i++ {
		lines = append(lines, fmt.Sprintf("msg-%03d", i))
	}
	run(strings.Join(lines, "\n")+"\n", "-P", "-t", "smoke", "-X", "acks=all", "-X", "enable.idempotence=true")

	out := run("", "-C", "-t", "smoke", "-o", "beginning", "-e", "-f", "%o %s\n")
	got := strings.Split(strings.TrimSpace(out), "\n")
	if len(got) != 100 {
		t.Fatalf("consumed %d messages, want 100:\n%s", len(got), out)
	}
	for i, l := range got {
		if want := fmt.Sprintf("%d msg-%03d", i, i); l != want {
			t.Fatalf("line %d: %q, want %q", i, l, want)
		}
	}

	out = run("", "-G", "kcat-group", "-o", "beginning", "-c", "100", "-f", "%s\n", "smoke")
	if n := len(strings.Split(strings.TrimSpace(out), "\n")); n != 100 {
		t.Fatalf("group consumer read %d messages, want 100", n)
	}
	// The group committed: a new member of the group starts after the 100.
	run("more\n", "-P", "-t", "smoke", "-X", "acks=all")
	out = run("", "-G", "kcat-group", "-c", "1", "-f", "%o %s\n", "smoke")
	if strings.TrimSpace(out) != "100 more" {
		t.Fatalf("after commit the group read %q, want \"100 more\"", out)
	}
}
