package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weir-io/weir/cluster"
)

// TestAdminACL: weir admin acl add, list and delete against a running controller.
func TestAdminACL(t *testing.T) {
	c, err := cluster.Start(cluster.Config{Dir: t.TempDir(), Controllers: 1, Brokers: 1, NoGossip: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := runAdminACL(ctx, append(args, "--controllers", strings.Join(c.APIAddrs(), ",")), &out); err != nil {
			t.Fatalf("weir admin acl %v: %v", args, err)
		}
		return out.String()
	}
	run("add", "--principal", "User:alice", "--operation", "read,describe", "--topic", "orders")
	run("add", "--principal", "User:bob", "--deny", "--operation", "write", "--topic", "logs-", "--pattern", "prefixed")
	out := run("list")
	for _, want := range []string{"User:alice  ALLOW       READ", "User:bob    DENY        WRITE      TOPIC     logs-   PREFIXED"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	if out := run("list", "--principal", "User:bob"); strings.Contains(out, "alice") {
		t.Errorf("list --principal User:bob shows alice:\n%s", out)
	}
	if out := run("delete", "--principal", "User:alice"); !strings.Contains(out, "2 bindings deleted") {
		t.Errorf("delete:\n%s", out)
	}
	if out := run("list"); strings.Contains(out, "alice") || !strings.Contains(out, "bob") {
		t.Errorf("after delete:\n%s", out)
	}
	var out2 bytes.Buffer
	if err := runAdminACL(ctx, []string{"add", "--principal", "alice", "--operation", "read", "--topic", "x", "--controllers", strings.Join(c.APIAddrs(), ",")}, &out2); err == nil || !strings.Contains(err.Error(), "Type:name") {
		t.Errorf("a principal without a type: %v", err)
	}
}
