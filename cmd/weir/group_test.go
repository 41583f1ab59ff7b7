package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/internal/testutil"
)

// TestGroupCommands runs weir group against a 3-broker cluster: a group consumer commits
// part of what was produced; list, describe (lag), reset-offsets, delete-offsets and
// delete are checked in order, each change read back with kadm's OffsetFetch.
//
// The topic "orders" has 2 partitions, each written in two batches an hour apart (record
// timestamps t0 and t0+1h): partition 0 gets 10+10 records and its log start is moved to
// 2 (DeleteRecords), partition 1 gets 5+5. The consumer commits 7 and 3.
func TestGroupCommands(t *testing.T) {
	c := startGroupCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := runGroup(ctx, append(args, "--bootstrap", c.Bootstrap(), "--timeout", "30s"), &out)
		return out.String(), err
	}
	mustRun := func(t *testing.T, args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("weir group %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if testing.Verbose() {
			t.Logf("weir group %s\n%s", strings.Join(args, " "), out)
		}
		return out
	}
	adm := kadm.NewClient(newTestClient(t, c))
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	produceOrders(ctx, t, c, adm, t0)

	cons := newTestClient(t, c, kgo.ConsumerGroup("app"), kgo.ConsumeTopics("orders"),
		kgo.DisableAutoCommit(), kgo.ClientID("lag-test"))
	memberID := consumeAndCommit(ctx, t, cons)
	committed := func(t *testing.T) map[int32]int64 {
		t.Helper()
		resps, err := adm.FetchOffsets(ctx, "app")
		if err != nil {
			t.Fatalf("OffsetFetch: %v", err)
		}
		got := map[int32]int64{}
		resps.Each(func(o kadm.OffsetResponse) { got[o.Partition] = o.At })
		return got
	}
	wantCommitted := func(t *testing.T, want map[int32]int64) {
		t.Helper()
		if got := committed(t); !maps.Equal(got, want) {
			t.Fatalf("committed offsets (OffsetFetch) %v, want %v", got, want)
		}
	}
	wantCommitted(t, map[int32]int64{0: 7, 1: 3})

	t.Run("help", func(t *testing.T) {
		if out := mustRun(t, "--help"); !strings.Contains(out, "reset-offsets GROUP") || !strings.Contains(out, "delete-offsets GROUP") {
			t.Errorf("weir group --help:\n%s", out)
		}
		out := mustRun(t, "reset-offsets", "--help")
		for _, want := range []string{"-to-datetime TIME", "-shift-by N", "-execute", "-all-topics", "-topic T[:P,P...]", "-sasl-mechanism", "stop its consumers"} {
			if !strings.Contains(out, want) {
				t.Errorf("reset-offsets --help lacks %q:\n%s", want, out)
			}
		}
		if out := mustRun(t, "list", "--help"); strings.Contains(out, "-execute") || strings.Contains(out, "-topic") || !strings.Contains(out, "-json") {
			t.Errorf("list --help shows other commands' flags, or lacks --json:\n%s", out)
		}
		if _, err := run("reset-offsets", "app", "--all-topics", "--to-earliest", "--to-latest"); err == nil || !strings.Contains(err.Error(), "exactly one of") {
			t.Errorf("two targets: %v", err)
		}
	})

	t.Run("list", func(t *testing.T) {
		out := mustRun(t, "list")
		if row := tableRow(out, "app"); cells(row, 0) != "app Stable consumer 1 "+fmt.Sprint(coordinatorOf(ctx, t, adm, "app")) {
			t.Errorf("list row %q:\n%s", row, out)
		}
		var rows []struct {
			Group        string `json:"group"`
			State        string `json:"state"`
			ProtocolType string `json:"protocol_type"`
			Members      int    `json:"members"`
		}
		decodeJSON(t, mustRun(t, "list", "--json"), &rows)
		if len(rows) != 1 || rows[0].Group != "app" || rows[0].State != "Stable" || rows[0].ProtocolType != "consumer" || rows[0].Members != 1 {
			t.Errorf("list --json: %+v", rows)
		}
	})

	t.Run("describe", func(t *testing.T) {
		out := mustRun(t, "describe", "app")
		for key, want := range map[string]string{"STATE": "Stable", "TOTAL-LAG": "20", "MEMBERS": "1",
			"COORDINATOR": fmt.Sprint(coordinatorOf(ctx, t, adm, "app"))} {
			if row := tableRow(out, key); cells(row, 1) != want {
				t.Errorf("describe %s row %q, want %s:\n%s", key, row, want, out)
			}
		}
		if row := tableRow(out, memberID); cells(row, 1) != "lag-test /127.0.0.1 orders:0,1" {
			t.Errorf("member row %q:\n%s", row, out)
		}
		for p, want := range map[string]string{"0": "7 20 13 " + memberID, "1": "3 10 7 " + memberID} {
			if row := tableRow(out, "orders", p); cells(row, 2) != want+" lag-test /127.0.0.1" {
				t.Errorf("partition %s row %q, want COMMITTED LOG-END LAG MEMBER-ID %s:\n%s", p, row, want, out)
			}
		}
		var ds []struct {
			Group    string `json:"group"`
			State    string `json:"state"`
			TotalLag int64  `json:"total_lag"`
			Members  []struct {
				MemberID string `json:"member_id"`
				ClientID string `json:"client_id"`
			} `json:"members"`
			Partitions []struct {
				Partition       int32  `json:"partition"`
				CommittedOffset int64  `json:"committed_offset"`
				LogStartOffset  int64  `json:"log_start_offset"`
				LogEndOffset    int64  `json:"log_end_offset"`
				Lag             int64  `json:"lag"`
				MemberID        string `json:"member_id"`
			} `json:"partitions"`
		}
		decodeJSON(t, mustRun(t, "describe", "app", "--json"), &ds)
		if len(ds) != 1 || ds[0].State != "Stable" || ds[0].TotalLag != 20 || len(ds[0].Partitions) != 2 || len(ds[0].Members) != 1 || ds[0].Members[0].MemberID != memberID || ds[0].Members[0].ClientID != "lag-test" {
			t.Fatalf("describe --json: %+v", ds)
		}
		p0, p1 := ds[0].Partitions[0], ds[0].Partitions[1]
		if p0.CommittedOffset != 7 || p0.LogStartOffset != 2 || p0.LogEndOffset != 20 || p0.Lag != 13 || p0.MemberID != memberID ||
			p1.CommittedOffset != 3 || p1.LogStartOffset != 0 || p1.LogEndOffset != 10 || p1.Lag != 7 {
			t.Errorf("describe --json partitions: %+v", ds[0].Partitions)
		}

		out, err := run("describe", "nobody", "--json")
		if !errors.Is(err, kerr.GroupIDNotFound) || !strings.Contains(err.Error(), "GROUP_ID_NOT_FOUND") || !strings.Contains(out, `"error": "GROUP_ID_NOT_FOUND"`) {
			t.Errorf("describe of an unknown group: %v\n%s", err, out)
		}
	})

	t.Run("refused while the consumer runs", func(t *testing.T) {
		_, err := run("reset-offsets", "app", "--all-topics", "--to-earliest", "--execute")
		if !errors.Is(err, kerr.NonEmptyGroup) || !strings.Contains(err.Error(), "stop the consumers of app first") {
			t.Errorf("reset of a running group: %v", err)
		}
		out, err := run("delete", "app")
		if !errors.Is(err, kerr.NonEmptyGroup) || cells(tableRow(out, "app"), 1) != "NON_EMPTY_GROUP" {
			t.Errorf("delete of a running group: %v\n%s", err, out)
		}
		wantCommitted(t, map[int32]int64{0: 7, 1: 3})
	})

	cons.Close() // leaves the group
	testutil.EventuallyNoError(t, 30*time.Second, "the group to be empty", func() error {
		d, err := adm.DescribeGroups(ctx, "app")
		if err != nil || d["app"].State != "Empty" {
			return fmt.Errorf("state %q, %v", d["app"].State, err)
		}
		return nil
	})

	t.Run("describe empty", func(t *testing.T) {
		out := mustRun(t, "describe", "app")
		if cells(tableRow(out, "STATE"), 1) != "Empty" || cells(tableRow(out, "orders", "0"), 2) != "7 20 13 - - -" || tableRow(out, "MEMBER-ID") != nil {
			t.Errorf("describe of the empty group: committed offsets and lag without members expected:\n%s", out)
		}
	})

	t.Run("reset", func(t *testing.T) {
		out := mustRun(t, "reset-offsets", "app", "--all-topics", "--to-earliest")
		if r0, r1 := tableRow(out, "orders", "0"), tableRow(out, "orders", "1"); cells(r0, 2) != "7 2" || cells(r1, 2) != "3 0" || !strings.Contains(out, "dry run") {
			t.Errorf("the --to-earliest plan:\n%s", out)
		}
		wantCommitted(t, map[int32]int64{0: 7, 1: 3}) // a plan changes nothing

		out = mustRun(t, "reset-offsets", "app", "--all-topics", "--to-earliest", "--execute")
		if !strings.Contains(out, "committed 2 offsets of group app") {
			t.Errorf("--execute:\n%s", out)
		}
		wantCommitted(t, map[int32]int64{0: 2, 1: 0}) // the log starts

		plan := resetJSON(t, mustRun(t, "reset-offsets", "app", "--topic", "orders", "--to-offset", "100", "--execute", "--json"))
		if !plan.Executed || plan.Group != "app" || plan.Partitions[0].CurrentOffset != 2 || plan.Partitions[0].NewOffset != 20 {
			t.Errorf("--to-offset 100 --json: %+v", plan)
		}
		wantCommitted(t, map[int32]int64{0: 20, 1: 10}) // clamped to the log ends
		mustRun(t, "seek", "app", "--topic", "orders", "--to-offset", "1", "--execute")
		wantCommitted(t, map[int32]int64{0: 2, 1: 1}) // partition 0 clamped up to its log start

		mustRun(t, "reset-offsets", "app", "--topic", "orders", "--to-datetime", t0.Add(30*time.Minute).Format(time.RFC3339), "--execute")
		wantCommitted(t, map[int32]int64{0: 10, 1: 5}) // the first records of the second batch
		for at, want := range map[time.Time][2]int64{t0.Add(2 * time.Hour): {20, 10}, t0.Add(-time.Hour): {2, 0}} {
			plan := resetJSON(t, mustRun(t, "reset-offsets", "app", "--topic", "orders", "--to-datetime", at.Format(time.RFC3339), "--json"))
			if plan.Executed || plan.Partitions[0].NewOffset != want[0] || plan.Partitions[1].NewOffset != want[1] {
				t.Errorf("--to-datetime %v: %+v, want new offsets %v", at, plan, want)
			}
		}
		wantCommitted(t, map[int32]int64{0: 10, 1: 5})

		mustRun(t, "reset-offsets", "app", "--topic", "orders:1", "--shift-by", "-3", "--execute")
		wantCommitted(t, map[int32]int64{0: 10, 1: 2}) // partition 0 not named: unchanged
		mustRun(t, "reset-offsets", "app", "--all-topics", "--shift-by", "-100", "--execute")
		wantCommitted(t, map[int32]int64{0: 2, 1: 0})
		mustRun(t, "reset-offsets", "app", "--all-topics", "--shift-by", "4", "--execute")
		wantCommitted(t, map[int32]int64{0: 6, 1: 4})

		if _, err := run("reset-offsets", "app", "--topic", "orders:7", "--to-earliest"); !errors.Is(err, kerr.UnknownTopicOrPartition) {
			t.Errorf("a partition that does not exist: %v", err)
		}
	})

	t.Run("delete", func(t *testing.T) {
		out := mustRun(t, "delete-offsets", "app", "--topic", "orders:1")
		if row := tableRow(out, "orders", "1"); cells(row, 2) != "deleted" {
			t.Errorf("delete-offsets:\n%s", out)
		}
		wantCommitted(t, map[int32]int64{0: 6})

		out = mustRun(t, "delete", "app")
		if row := tableRow(out, "app"); cells(row, 1) != "deleted" {
			t.Errorf("delete:\n%s", out)
		}
		wantCommitted(t, map[int32]int64{})
		if out := mustRun(t, "list"); tableRow(out, "app") != nil {
			t.Errorf("list after delete:\n%s", out)
		}
		_, err := run("delete", "app", "--json")
		if !errors.Is(err, kerr.GroupIDNotFound) || !strings.Contains(err.Error(), "weir group list shows the groups") {
			t.Errorf("delete of a deleted group: %v", err)
		}
	})
}
