package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// weir group reset-offsets (and its alias seek): kafka-consumer-groups.sh --reset-offsets.

const groupResetHelp = `Usage: weir group reset-offsets GROUP (--topic T[:P,P...]... | --all-topics) TARGET [--execute] [flags]
       weir group seek ... is the same command

Sets GROUP's committed offsets, as kafka-consumer-groups.sh --reset-offsets does. Without
--execute it only prints the plan (topic, partition, current offset, new offset) and
changes nothing; with --execute it commits the new offsets (OffsetCommit).

Kafka resets only a group without members: the command refuses while the group has any
(stop its consumers, and run it again). A group that does not exist yet is created with
the offsets. New offsets are kept within each partition's log, [log start, log end]: past
the end becomes the end, before the start the start, as Kafka does.

TARGET is exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset, --shift-by.

Examples:
  weir group reset-offsets orders-app --topic orders --to-earliest
  weir group reset-offsets orders-app --all-topics --to-datetime 2024-05-01T12:00:00Z --execute
  weir group seek orders-app --topic orders:0,1 --shift-by -100 --execute
`

// resetPlan is what reset-offsets prints (and its --json): a partition's current
// committed offset (-1: none) and the new one.
type resetPlan struct {
	Group      string     `json:"group"`
	Executed   bool       `json:"executed"`
	Partitions []resetRow `json:"partitions"`
}

type resetRow struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	CurrentOffset int64  `json:"current_offset"`
	NewOffset     int64  `json:"new_offset"`
}

// resetTarget is where the offsets go: the TARGET flag given (its name) and its value.
type resetTarget struct {
	flag string
	at   time.Time // --to-datetime
	n    int64     // --to-offset, --shift-by
}

var resetTargetFlags = []string{"to-earliest", "to-latest", "to-datetime", "to-offset", "shift-by"}

func runGroupReset(ctx context.Context, name string, args []string, w io.Writer) error {
	c := newGroupCmd(name, groupResetHelp, w)
	topics := make(topicParts)
	var all, execute bool
	var datetime string
	var target resetTarget
	c.fs.Var(topics, "topic", "reset topic `T[:P,P...]`: all its partitions, or only those listed after the colon (repeatable)")
	c.fs.BoolVar(&all, "all-topics", false, "reset every topic the group has committed offsets for")
	c.fs.Bool("to-earliest", false, "TARGET: each partition's log start (the group re-reads all that is kept)")
	c.fs.Bool("to-latest", false, "TARGET: each partition's log end, the high watermark (the group skips all written so far)")
	c.fs.StringVar(&datetime, "to-datetime", "", "TARGET: the first offset of records written at or after `TIME` (RFC 3339: 2024-05-01T12:00:00Z, or with an offset +02:00), found by ListOffsets; a TIME after the last record gives the log end")
	c.fs.Int64Var(&target.n, "to-offset", 0, "TARGET: offset `N` in every partition named")
	c.fs.Int64Var(&target.n, "shift-by", 0, "TARGET: the committed offset plus `N` (negative moves back); every partition needs a committed offset")
	c.fs.BoolVar(&execute, "execute", false, "commit the new offsets; without it the plan is printed and nothing changes")
	if done, err := c.parse(args); done {
		return err
	}
	if len(c.pos) != 1 {
		return fmt.Errorf("group %s needs one GROUP (got %d): weir group %s --help", name, len(c.pos), name)
	}
	if all == (len(topics) > 0) {
		return fmt.Errorf("group %s needs --topic T[:P,P...] (repeatable) or --all-topics, not both", name)
	}
	if err := target.from(c.fs, datetime); err != nil {
		return fmt.Errorf("group %s %w", name, err)
	}

	ctx, adm, stop, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer stop()
	plan, err := planReset(ctx, adm, c.pos[0], topics, target)
	if err != nil {
		return err
	}
	var commitErr error
	if execute {
		commitErr = commitPlan(ctx, adm, plan)
		plan.Executed = commitErr == nil
	}
	if err := c.emit(w, plan, func(tw io.Writer) { plan.table(tw, execute) }); err != nil {
		return err
	}
	return commitErr
}

// from sets t.flag to the one TARGET flag given in fs, and t.at from datetime for
// --to-datetime (t.n was set by the flag itself).
func (t *resetTarget) from(fs *flag.FlagSet, datetime string) error {
	var given []string
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(resetTargetFlags, f.Name) {
			given = append(given, "--"+f.Name)
		}
	})
	if len(given) != 1 {
		return fmt.Errorf("needs exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset, --shift-by (got %d: %s)", len(given), strings.Join(given, " "))
	}
	t.flag = strings.TrimPrefix(given[0], "--")
	if t.flag == "to-datetime" {
		at, err := time.Parse(time.RFC3339, datetime)
		if err != nil {
			return fmt.Errorf("--to-datetime %q: not an RFC 3339 time such as 2024-05-01T12:00:00Z", datetime)
		}
		t.at = at
	}
	return nil
}

// table prints the plan, and whether it was committed (asked: --execute was given).
func (p resetPlan) table(tw io.Writer, asked bool) {
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT-OFFSET\tNEW-OFFSET")
	for _, r := range p.Partitions {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", r.Topic, r.Partition, offsetCell(r.CurrentOffset), r.NewOffset)
	}
	switch {
	case p.Executed:
		fmt.Fprintf(tw, "\ncommitted %d offsets of group %s\n", len(p.Partitions), p.Group)
	case !asked:
		fmt.Fprintln(tw, "\ndry run: nothing changed; add --execute to commit these offsets")
	}
}

// planReset works out the new offsets: the group must have no members, the partitions are
// those named (or all with a committed offset when topics is empty), and each new offset
// is kept within the partition's [log start, log end].
func planReset(ctx context.Context, adm *kadm.Client, group string, topics topicParts, target resetTarget) (resetPlan, error) {
	plan := resetPlan{Group: group, Partitions: []resetRow{}}
	if err := checkGroupEmpty(ctx, adm, group); err != nil {
		return plan, err
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return plan, &groupErr{group: group, err: err}
	}
	var set kadm.TopicsSet
	if len(topics) == 0 {
		if set = committed.Partitions(); len(set) == 0 {
			return plan, fmt.Errorf("group %s has no committed offsets for --all-topics to reset: name the topics with --topic", group)
		}
	} else if set, err = topics.resolve(ctx, adm); err != nil {
		return plan, err
	}
	names := set.Topics()
	start, err := adm.ListStartOffsets(ctx, names...)
	if err != nil {
		return plan, fmt.Errorf("group: listing the log start offsets: %w", err)
	}
	end, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return plan, fmt.Errorf("group: listing the log end offsets: %w", err)
	}
	var byTime kadm.ListedOffsets
	if target.flag == "to-datetime" {
		// A time after the last record: kadm answers the log end, as Kafka's tool does.
		if byTime, err = adm.ListOffsetsAfterMilli(ctx, target.at.UnixMilli(), names...); err != nil {
			return plan, fmt.Errorf("group: listing offsets by time: %w", err)
		}
	}
	for _, tp := range sortedPartitions(set) {
		where := fmt.Sprintf("%s/%d", tp.Topic, tp.Partition)
		first, err := listedOffset(start, tp)
		if err != nil {
			return plan, &groupErr{group: group, where: where, detail: "listing its log start", err: err}
		}
		last, err := listedOffset(end, tp)
		if err != nil {
			return plan, &groupErr{group: group, where: where, detail: "listing its log end", err: err}
		}
		cur := int64(-1)
		if c, ok := committed.Lookup(tp.Topic, tp.Partition); ok && c.Err == nil {
			cur = c.At
		}
		var next int64
		switch target.flag {
		case "to-earliest":
			next = first
		case "to-latest":
			next = last
		case "to-offset":
			next = target.n
		case "shift-by":
			if cur < 0 {
				return plan, fmt.Errorf("group %s has no committed offset for %s to shift: use --to-offset, --to-earliest or --to-latest for it", group, where)
			}
			next = cur + target.n
		case "to-datetime":
			if next, err = listedOffset(byTime, tp); err != nil {
				return plan, &groupErr{group: group, where: where, detail: "listing its offset by time", err: err}
			}
		}
		next = max(first, min(last, next))
		plan.Partitions = append(plan.Partitions, resetRow{Topic: tp.Topic, Partition: tp.Partition, CurrentOffset: cur, NewOffset: next})
	}
	return plan, nil
}

// checkGroupEmpty refuses a group with members: Kafka commits an admin's offsets only to a
// group without members (the broker's answer otherwise is UNKNOWN_MEMBER_ID, which would
// say less). A group that does not exist is fine: the commit creates it.
func checkGroupEmpty(ctx context.Context, adm *kadm.Client, group string) error {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return fmt.Errorf("group: describing %s: %w", group, err)
	}
	d, ok := described[group]
	switch {
	case !ok:
		return fmt.Errorf("group: describing %s: no answer for the group", group)
	case d.Err != nil && !errors.Is(d.Err, kerr.GroupIDNotFound):
		return &groupErr{group: group, err: d.Err}
	case len(d.Members) > 0 || (d.State != "Empty" && d.State != "Dead" && d.State != ""):
		return &groupErr{group: group, detail: fmt.Sprintf("state %s, %d members", d.State, len(d.Members)), err: kerr.NonEmptyGroup}
	}
	return nil
}

// listedOffset is tp's offset in l, or the error that kept it from being listed.
func listedOffset(l kadm.ListedOffsets, tp topicPartition) (int64, error) {
	o, ok := l.Lookup(tp.Topic, tp.Partition)
	switch {
	case !ok:
		if missing, ok := l.Lookup(tp.Topic, -1); ok && missing.Err != nil {
			return 0, missing.Err // the topic is gone
		}
		return 0, errors.New("no answer for the partition")
	case o.Err != nil:
		return 0, o.Err
	}
	return o.Offset, nil
}

// commitPlan commits the plan's offsets for its group (OffsetCommit, as an admin: no
// member, generation -1).
func commitPlan(ctx context.Context, adm *kadm.Client, plan resetPlan) error {
	offsets := make(kadm.Offsets)
	for _, r := range plan.Partitions {
		offsets.Add(kadm.Offset{Topic: r.Topic, Partition: r.Partition, At: r.NewOffset, LeaderEpoch: -1})
	}
	resps, err := adm.CommitOffsets(ctx, plan.Group, offsets)
	if err != nil {
		return &groupErr{group: plan.Group, detail: "committing", err: err}
	}
	var errs []error
	for _, r := range resps.Sorted() {
		if r.Err != nil {
			errs = append(errs, &groupErr{group: plan.Group, where: fmt.Sprintf("%s/%d", r.Topic, r.Partition), detail: "committing", err: r.Err})
		}
	}
	return errors.Join(errs...)
}
