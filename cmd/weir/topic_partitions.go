package main

import (
	"context"
	"fmt"
	"io"
)

const topicAddPartitionsHelp = `Usage: weir topic add-partitions NAME... (--num N | --total N) [flags]

Adds partitions to the topics (CreatePartitions): --num N adds N to each, --total N grows
each to N in all. A topic's partition count never shrinks. Records with a key may map to
another partition once the count changes: consumers relying on key order should know.
`

// grownTopic is one row of weir topic add-partitions.
type grownTopic struct {
	Topic  string `json:"topic"`
	Status string `json:"status"` // added or failed
	Before int    `json:"partitions_before"`
	After  int    `json:"partitions_after"` // what was asked for, when the broker accepted it
	itemErr
}

func runTopicAddPartitions(ctx context.Context, args []string, w io.Writer) error {
	const cmd = "topic add-partitions"
	c := newKafkaCmd("weir topic add-partitions", topicAddPartitionsHelp, w)
	num := c.fs.Int("num", 0, "partitions to add to each topic")
	total := c.fs.Int("total", 0, "partition count to grow each topic to")
	names, help, err := c.parse(args)
	if help || err != nil {
		return err
	}
	if err := needNames(cmd, names); err != nil {
		return err
	}
	if (*num > 0) == (*total > 0) || *num < 0 || *total < 0 {
		return fmt.Errorf("%s: give --num N (partitions to add) or --total N (the new count), one of them, positive", cmd)
	}
	ctx, _, adm, done, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	// The counts before: to print what changed, and to leave unknown topics out.
	md, err := adm.Metadata(ctx, names...)
	if err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	rows := make([]grownTopic, len(names))
	var known []string
	for i, n := range names {
		td, ok := md.Topics[n]
		if !ok {
			td.Err = errNoAnswer
		}
		rows[i] = grownTopic{Topic: n, Status: "added", Before: len(td.Partitions), After: *total, itemErr: newItemErr(td.Err, "", n, "")}
		if *num > 0 {
			rows[i].After = rows[i].Before + *num
		}
		if !rows[i].failed() {
			known = append(known, n)
		}
	}
	if len(known) > 0 {
		grow := adm.CreatePartitions
		n := *num
		if *total > 0 {
			grow, n = adm.UpdatePartitions, *total
		}
		resp, err := grow(ctx, n, known...)
		if err != nil {
			return fmt.Errorf("%s: %w", cmd, err)
		}
		for i := range rows {
			if rows[i].failed() {
				continue // not asked
			}
			r, ok := resp[rows[i].Topic]
			if !ok {
				r.Err = errNoAnswer
			}
			rows[i].itemErr = newItemErr(r.Err, r.ErrMessage, rows[i].Topic, "")
		}
	}
	var fail failures
	for i := range rows {
		if rows[i].failed() {
			rows[i].Status, rows[i].After = "failed", rows[i].Before
		}
		fail.add(rows[i].Topic, rows[i].itemErr)
	}
	err = c.emit(w, rows, func(tw io.Writer) {
		fmt.Fprintln(tw, "TOPIC\tSTATUS\tPARTITIONS\tERROR")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%d -> %d\t%s\n", r.Topic, r.Status, r.Before, r.After, r.cell())
		}
	})
	if err != nil {
		return err
	}
	return fail.err(cmd, "topics")
}
