package test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// debianPython is Debian's Python, where python3-confluent-kafka installs (a python3 on
// PATH may be another build without it).
const debianPython = "/usr/bin/python3"

// TestLibrdkafkaTransactions: librdkafka's transactional producer (confluent-kafka-python
// on Debian's librdkafka) commits, aborts and commits against a broker; its
// read_committed consumer reads only the committed records, its read_uncommitted one all
// (python/txn.py). CI installs python3-confluent-kafka (.ci/run, WEIR_REQUIRE_RDKAFKA_PY).
func TestLibrdkafkaTransactions(t *testing.T) {
	t.Parallel()
	if err := exec.Command(debianPython, "-c", "import confluent_kafka").Run(); err != nil {
		if os.Getenv("WEIR_REQUIRE_RDKAFKA_PY") != "" {
			t.Fatalf("python3-confluent-kafka is required (WEIR_REQUIRE_RDKAFKA_PY): %v", err)
		}
		t.Skip("python3-confluent-kafka not installed")
	}
	b := startCompatBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, debianPython, "python/txn.py", b.bootstrap).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK librdkafka transactions") {
		t.Fatalf("python/txn.py %s: %v\n%s", b.bootstrap, err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "step ") {
			t.Log(l)
		}
	}
	t.Logf("API versions on the wire: %s", b.wire.summary())
}
