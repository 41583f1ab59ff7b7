package broker

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/weir-io/weir/broker/group"
)

// --group-consumer-migration-policy sets the group coordinator's
// group.consumer.migration.policy: bidirectional by default, Kafka's names otherwise, an
// unknown name refused.
func TestGroupMigrationPolicyFlag(t *testing.T) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.BindFlags(fs)
	if cfg.Group.MigrationPolicy != group.MigrationBidirectional {
		t.Fatalf("default policy %q", cfg.Group.MigrationPolicy)
	}
	if err := fs.Parse([]string{"--group-consumer-migration-policy", "Upgrade"}); err != nil {
		t.Fatal(err)
	}
	if cfg.Group.MigrationPolicy != group.MigrationUpgrade {
		t.Fatalf("policy after --group-consumer-migration-policy Upgrade: %q", cfg.Group.MigrationPolicy)
	}
	if got := cfg.staticConfigs()["group.consumer.migration.policy"]; got != "upgrade" {
		t.Fatalf("DescribeConfigs value %q", got)
	}
	fs2 := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs2.SetOutput(io.Discard)
	cfg.BindFlags(fs2)
	// (The flag package keeps only the error's text.)
	if err := fs2.Parse([]string{"--group-consumer-migration-policy", "both"}); err == nil || !strings.Contains(err.Error(), group.ErrMigrationPolicy.Error()) {
		t.Fatalf("unknown policy: %v", err)
	}
}
