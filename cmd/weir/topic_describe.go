package main

import (
	"context"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const topicDescribeHelp = `Usage: weir topic describe NAME... [flags]

Per partition of each topic: the leader broker, its leader epoch, the replicas the broker
reports, the log start offset (the first offset still kept) and the high watermark (the
next offset to be written: the records a consumer can read end there). Then the topic's
configs not at their default (weir config describe --topic T --all shows every one).
Built on Metadata, ListOffsets and DescribeConfigs.
`

// describedTopic is one topic of weir topic describe.
type describedTopic struct {
	Topic      string               `json:"topic"`
	TopicID    string               `json:"topic_id,omitempty"`
	Internal   bool                 `json:"internal"`
	Partitions []describedPartition `json:"partitions"`
	Configs    []configEntry        `json:"configs"` // not at their default
	itemErr
}

// describedPartition is one partition of weir topic describe; an offset the broker did
// not answer is -1, with the partition's error.
type describedPartition struct {
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	Replicas       []int32 `json:"replicas"`
	LogStartOffset int64   `json:"log_start_offset"`
	HighWatermark  int64   `json:"high_watermark"`
	itemErr
}

func runTopicDescribe(ctx context.Context, args []string, w io.Writer) error {
	const cmd = "topic describe"
	c := newKafkaCmd("weir topic describe", topicDescribeHelp, w)
	names, help, err := c.parse(args)
	if help || err != nil {
		return err
	}
	if err := needNames(cmd, names); err != nil {
		return err
	}
	ctx, cl, adm, done, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	md, err := adm.Metadata(ctx, names...)
	if err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	// Partial answers are kept: a partition whose leader is away shows its error, the
	// others their offsets.
	var offs listedOffsets
	offs.starts, offs.startErr = adm.ListStartOffsets(ctx, names...)
	offs.ends, offs.endErr = adm.ListEndOffsets(ctx, names...)
	var known []string
	for _, n := range names {
		if td, ok := md.Topics[n]; ok && td.Err == nil {
			known = append(known, n)
		}
	}
	configs := map[string]resourceConfigs{}
	for _, rc := range describeConfigs(ctx, cl, kmsg.ConfigResourceTypeTopic, known, false) {
		configs[rc.Name] = rc
	}
	var out []describedTopic
	var fail failures
	for _, n := range names {
		td, ok := md.Topics[n]
		if !ok {
			td.Err = errNoAnswer
		}
		t := describedTopic{Topic: n, TopicID: topicID(td.ID), Internal: td.IsInternal, Partitions: []describedPartition{}, Configs: []configEntry{},
			itemErr: newItemErr(td.Err, "", n, "")}
		if rc, ok := configs[n]; ok {
			t.Configs = rc.Configs
			if !t.failed() {
				t.itemErr = rc.itemErr
			}
		}
		for _, p := range td.Partitions.Sorted() {
			dp := offs.partition(p)
			fail.add(fmt.Sprintf("%s partition %d", n, p.Partition), dp.itemErr)
			t.Partitions = append(t.Partitions, dp)
		}
		fail.add(n, t.itemErr)
		out = append(out, t)
	}
	err = c.emit(w, out, func(tw io.Writer) { printDescribed(tw, out) })
	if err != nil {
		return err
	}
	return fail.err(cmd, "topics and partitions")
}

func printDescribed(tw io.Writer, out []describedTopic) {
	for i, t := range out {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		if t.failed() && len(t.Partitions) == 0 {
			fmt.Fprintf(tw, "TOPIC %s: %s\n", t.Topic, t.text())
			continue
		}
		internal := ""
		if t.Internal {
			internal = ", internal"
		}
		fmt.Fprintf(tw, "TOPIC %s (id %s, %d partitions%s)\n", t.Topic, dash(t.TopicID), len(t.Partitions), internal)
		if t.failed() {
			fmt.Fprintf(tw, "error: %s\n", t.text())
		}
		fmt.Fprintln(tw, "PARTITION\tLEADER\tLEADER EPOCH\tREPLICAS\tLOG START\tHIGH WATERMARK\tERROR")
		for _, p := range t.Partitions {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%v\t%s\t%s\t%s\n", p.Partition, count(int64(p.Leader)), count(int64(p.LeaderEpoch)), p.Replicas,
				count(p.LogStartOffset), count(p.HighWatermark), p.cell())
		}
		if len(t.Configs) == 0 {
			fmt.Fprintln(tw, "configs: all at their defaults")
			continue
		}
		fmt.Fprintln(tw, "configs not at their default:") // (a line without tabs: the columns align apart)
		fmt.Fprintln(tw, "CONFIG\tVALUE\tSOURCE")
		for _, e := range t.Configs {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Name, e.value(), e.Source)
		}
	}
}

// listedOffsets are describe's ListOffsets answers (kept when partial).
type listedOffsets struct {
	starts, ends     kadm.ListedOffsets
	startErr, endErr error
}

// partition describes p with its offsets; an offset not answered is -1, with the
// partition's error.
func (o listedOffsets) partition(p kadm.PartitionDetail) describedPartition {
	dp := describedPartition{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, LogStartOffset: -1, HighWatermark: -1}
	err := p.Err
	for _, l := range []struct {
		list kadm.ListedOffsets
		to   *int64
		err  error
	}{{o.starts, &dp.LogStartOffset, o.startErr}, {o.ends, &dp.HighWatermark, o.endErr}} {
		lo, ok := l.list.Lookup(p.Topic, p.Partition)
		switch {
		case ok && lo.Err == nil:
			*l.to = lo.Offset
		case err != nil:
		case ok:
			err = lo.Err
		case l.err != nil:
			err = l.err
		default:
			err = errNoAnswer
		}
	}
	dp.itemErr = newItemErr(err, "", p.Topic, "")
	return dp
}
