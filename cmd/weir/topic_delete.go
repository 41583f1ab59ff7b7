package main

import (
	"context"
	"fmt"
	"io"
)

const topicDeleteHelp = `Usage: weir topic delete NAME... [flags]

Deletes the topics and their data (DeleteTopics). There is no undo: a topic created again
under the same name is a new, empty topic with a new ID.
`

// deletedTopic is one row of weir topic delete.
type deletedTopic struct {
	Topic  string `json:"topic"`
	Status string `json:"status"` // deleted or failed
	itemErr
}

func runTopicDelete(ctx context.Context, args []string, w io.Writer) error {
	const cmd = "topic delete"
	c := newKafkaCmd("weir topic delete", topicDeleteHelp, w)
	names, help, err := c.parse(args)
	if help || err != nil {
		return err
	}
	if err := needNames(cmd, names); err != nil {
		return err
	}
	ctx, _, adm, done, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	resp, err := adm.DeleteTopics(ctx, names...)
	if err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	var rows []deletedTopic
	var fail failures
	for _, n := range names {
		row := deletedTopic{Topic: n, Status: "deleted"}
		r, ok := resp[n]
		if !ok {
			r.Err = errNoAnswer
		}
		if row.itemErr = newItemErr(r.Err, r.ErrMessage, n, ""); row.failed() {
			row.Status = "failed"
		}
		fail.add(n, row.itemErr)
		rows = append(rows, row)
	}
	err = c.emit(w, rows, func(tw io.Writer) {
		fmt.Fprintln(tw, "TOPIC\tSTATUS\tERROR")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Topic, r.Status, r.cell())
		}
	})
	if err != nil {
		return err
	}
	return fail.err(cmd, "topics")
}
