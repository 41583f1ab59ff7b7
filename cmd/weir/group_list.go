package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// weir group list, delete and delete-offsets.

const groupListHelp = `Usage: weir group list [flags]

Lists every group of the cluster (ListGroups on every broker): its state (Stable, Empty,
PreparingRebalance, ...), protocol type ("consumer" for consumers, "share" for share
groups; empty for a group that only stores offsets), member count and coordinator broker.
`

// listedGroup is one row of weir group list (and its --json).
type listedGroup struct {
	Group string `json:"group"`
	// Type is the group's type (classic, consumer, share) when the brokers say it.
	Type         string `json:"type,omitempty"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Members      int    `json:"members"`
	Coordinator  int32  `json:"coordinator"`
}

func runGroupList(ctx context.Context, args []string, w io.Writer) error {
	c := newGroupCmd("list", groupListHelp, w)
	if done, err := c.parse(args); done {
		return err
	}
	if len(c.pos) > 0 {
		return fmt.Errorf("group list takes no arguments (got %q): weir group describe GROUP shows one group", c.pos)
	}
	ctx, adm, stop, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer stop()
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("group: listing groups: %w", err)
	}
	rows := make([]listedGroup, 0, len(listed))
	for _, g := range listed.Sorted() {
		rows = append(rows, listedGroup{Group: g.Group, Type: g.GroupType, State: g.State, ProtocolType: g.ProtocolType, Coordinator: g.Coordinator})
	}
	var classic, share []string
	for _, r := range rows {
		if r.Type == "share" {
			share = append(share, r.Group)
		} else {
			classic = append(classic, r.Group)
		}
	}
	if len(classic) > 0 {
		// The member counts: DescribeGroups (ShareGroupDescribe for share groups). A group
		// gone in between keeps 0 members.
		described, err := adm.DescribeGroups(ctx, classic...)
		if err != nil && len(described) == 0 {
			return fmt.Errorf("group: describing groups: %w", err)
		}
		for i := range rows {
			if d, ok := described[rows[i].Group]; ok && d.Err == nil && rows[i].Type != "share" {
				rows[i].Members = len(d.Members)
			}
		}
	}
	if counts := shareMemberCounts(ctx, adm, share); len(counts) > 0 {
		for i := range rows {
			if n, ok := counts[rows[i].Group]; ok && rows[i].Type == "share" {
				rows[i].Members = n
			}
		}
	}
	return c.emit(w, rows, func(tw io.Writer) {
		fmt.Fprintln(tw, "GROUP\tSTATE\tPROTOCOL-TYPE\tMEMBERS\tCOORDINATOR")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", r.Group, r.State, dash(r.ProtocolType), r.Members, r.Coordinator)
		}
	})
}

const groupDeleteHelp = `Usage: weir group delete GROUP... [flags]

Deletes each group and its committed offsets (DeleteGroups). Kafka deletes only a group
without members: stop its consumers first (NON_EMPTY_GROUP otherwise). A group that does
not exist is GROUP_ID_NOT_FOUND. The exit code is 1 if any group was not deleted.
`

// groupResult is a per-group outcome of delete (and its --json).
type groupResult struct {
	Group   string `json:"group"`
	Deleted bool   `json:"deleted"`
	Error   string `json:"error,omitempty"`
	Hint    string `json:"hint,omitempty"`
}

func runGroupDelete(ctx context.Context, args []string, w io.Writer) error {
	c := newGroupCmd("delete", groupDeleteHelp, w)
	if done, err := c.parse(args); done {
		return err
	}
	groups := uniq(c.pos)
	if len(groups) == 0 {
		return errors.New("group delete needs at least one GROUP (weir group list shows them)")
	}
	ctx, adm, stop, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer stop()
	resps, err := adm.DeleteGroups(ctx, groups...)
	if err != nil && len(resps) == 0 {
		return fmt.Errorf("group: deleting %q: %w", groups, err)
	}
	var rows []groupResult
	var errs []error
	for _, g := range groups {
		r, ok := resps[g]
		gerr := r.Err
		if !ok {
			gerr = cmp.Or(err, errors.New("no answer for the group"))
		}
		row := groupResult{Group: g, Deleted: gerr == nil}
		if gerr != nil {
			row.Error, row.Hint = errorFields(g, gerr)
			errs = append(errs, &groupErr{group: g, err: gerr})
		}
		rows = append(rows, row)
	}
	if err := c.emit(w, rows, func(tw io.Writer) {
		fmt.Fprintln(tw, "GROUP\tSTATUS")
		for _, r := range rows {
			status := "deleted"
			if !r.Deleted {
				status = r.Error
			}
			fmt.Fprintf(tw, "%s\t%s\n", r.Group, status)
		}
	}); err != nil {
		return err
	}
	return errors.Join(errs...)
}

const groupDeleteOffsetsHelp = `Usage: weir group delete-offsets GROUP --topic T[:P,P...] [--topic ...] [flags]

Deletes GROUP's committed offsets of the partitions named (OffsetDelete, KIP-496): the
group's consumers then start those partitions from their auto.offset.reset. A group with
members keeps the offsets of topics a member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC);
an empty group left with no offsets is removed, as Kafka does.
`

// partitionResult is a per-partition outcome of delete-offsets (and its --json).
type partitionResult struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Deleted   bool   `json:"deleted"`
	Error     string `json:"error,omitempty"`
	Hint      string `json:"hint,omitempty"`
}

func runGroupDeleteOffsets(ctx context.Context, args []string, w io.Writer) error {
	c := newGroupCmd("delete-offsets", groupDeleteOffsetsHelp, w)
	topics := make(topicParts)
	c.fs.Var(topics, "topic", "delete the offsets of topic `T[:P,P...]`: all its partitions, or only those listed after the colon (repeatable)")
	if done, err := c.parse(args); done {
		return err
	}
	if len(c.pos) != 1 || len(topics) == 0 {
		return errors.New("group delete-offsets needs one GROUP and at least one --topic T[:P,P...]")
	}
	group := c.pos[0]
	ctx, adm, stop, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer stop()
	set, err := topics.resolve(ctx, adm)
	if err != nil {
		return err
	}
	resps, err := adm.DeleteOffsets(ctx, group, set)
	if err != nil {
		return &groupErr{group: group, err: err}
	}
	var rows []partitionResult
	var errs []error
	for _, tp := range sortedPartitions(set) {
		perr, ok := resps.Lookup(tp.Topic, tp.Partition)
		if !ok {
			perr = errors.New("no answer for the partition")
		}
		row := partitionResult{Topic: tp.Topic, Partition: tp.Partition, Deleted: perr == nil}
		if perr != nil {
			row.Error, row.Hint = errorFields(group, perr)
			errs = append(errs, &groupErr{group: group, where: fmt.Sprintf("%s/%d", tp.Topic, tp.Partition), err: perr})
		}
		rows = append(rows, row)
	}
	if err := c.emit(w, rows, func(tw io.Writer) {
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTATUS")
		for _, r := range rows {
			status := "deleted"
			if !r.Deleted {
				status = r.Error
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\n", r.Topic, r.Partition, status)
		}
	}); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// topicPartition names one partition.
type topicPartition struct {
	Topic     string
	Partition int32
}

// sortedPartitions lists set by topic, then partition.
func sortedPartitions(set kadm.TopicsSet) []topicPartition {
	var out []topicPartition
	set.Each(func(t string, p int32) { out = append(out, topicPartition{t, p}) })
	slices.SortFunc(out, func(a, b topicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// uniq is names without repeats, in their first order.
func uniq(names []string) []string {
	var out []string
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
