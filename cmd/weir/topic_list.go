package main

import (
	"context"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kadm"
)

const topicListHelp = `Usage: weir topic list [flags]

Lists the topics the cluster's Metadata shows you (those your principal may describe),
with their partition count and the replicas per partition the broker reports. Internal
topics (__consumer_offsets) are hidden unless --internal.
`

// listedTopic is one row of weir topic list.
type listedTopic struct {
	Topic      string `json:"topic"`
	TopicID    string `json:"topic_id,omitempty"`
	Partitions int    `json:"partitions"`
	Replicas   int    `json:"replicas"` // the most replicas any partition lists
	Internal   bool   `json:"internal"`
	itemErr
}

func runTopicList(ctx context.Context, args []string, w io.Writer) error {
	const cmd = "topic list"
	c := newKafkaCmd("weir topic list", topicListHelp, w)
	internal := c.fs.Bool("internal", false, "also list internal topics (__consumer_offsets)")
	names, help, err := c.parse(args)
	if help || err != nil {
		return err
	}
	if len(names) > 0 {
		return fmt.Errorf("%s: takes no topic names (weir topic describe NAME... describes topics)", cmd)
	}
	ctx, _, adm, done, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	tds, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	var rows []listedTopic
	var fail failures
	for _, td := range tds.Sorted() { // by name
		if td.IsInternal && !*internal {
			continue
		}
		row := listedTopic{Topic: td.Topic, TopicID: topicID(td.ID), Partitions: len(td.Partitions), Replicas: maxReplicas(td), Internal: td.IsInternal,
			itemErr: newItemErr(td.Err, "", td.Topic, "")}
		fail.add(td.Topic, row.itemErr)
		rows = append(rows, row)
	}
	if rows == nil {
		rows = []listedTopic{} // --json prints [], not null
	}
	err = c.emit(w, rows, func(tw io.Writer) {
		fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tREPLICAS\tINTERNAL\tERROR")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%v\t%s\n", r.Topic, r.Partitions, r.Replicas, r.Internal, r.cell())
		}
	})
	if err != nil {
		return err
	}
	return fail.err(cmd, "topics")
}

// maxReplicas is the most replicas any of the topic's partitions lists.
func maxReplicas(td kadm.TopicDetail) int {
	n := 0
	for _, p := range td.Partitions {
		n = max(n, len(p.Replicas))
	}
	return n
}
