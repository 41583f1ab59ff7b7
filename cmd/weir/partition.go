package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/weir-io/weir/metadata"
)

const partitionUsage = `Usage: weir partition describe TOPIC [--partition N] [flags]

Where each partition's data lives, from the controllers (leader, log chain, object
manifest, producer state as of the last upload) and from the brokers over Kafka
(log start and high watermark: ListOffsets; bytes in each WAL directory and in object
storage: DescribeLogDirs; idempotent producers: DescribeProducers):

  PARTITION   the partition
  LEADER      leader broker and leader epoch; "moving to B" during a graceful move,
              "recovering" after a failover until the new leader has read the WAL tail
  LOG START / HIGH WATERMARK   the first and next offsets
  IN OBJECTS  offsets below this are in object storage, with their bytes
  IN WAL      bytes of records not in object storage yet, and in how many WAL directories
  PRODUCERS   idempotent producers with state
  LOG CHAIN   broker@first-offset for each broker that led it; the WALs that hold its data

--json prints every field, with each WAL directory's path and bytes.

Flags:
`

// partitionInfo is one partition as `weir partition describe` shows it.
type partitionInfo struct {
	Topic         string          `json:"topic"`
	Partition     int32           `json:"partition"`
	Leader        int32           `json:"leader"`
	LeaderEpoch   int32           `json:"leader_epoch"`
	MovingTo      *int32          `json:"moving_to,omitempty"`
	Recovering    bool            `json:"recovering,omitempty"`
	LogStart      int64           `json:"log_start"`
	HighWatermark int64           `json:"high_watermark"`
	InObjectsTo   int64           `json:"in_objects_below"` // -1: nothing in object storage
	Objects       int             `json:"objects"`
	ObjectBytes   int64           `json:"object_bytes"`
	WALBytes      int64           `json:"wal_bytes"`
	WALDirs       []walDirInfo    `json:"wal_dirs"`
	Producers     int             `json:"producers"`
	LogChain      []logRangeInfo  `json:"log_chain"`
	Errors        []string        `json:"errors,omitempty"`
	ProducerList  []producerBrief `json:"producer_list,omitempty"`
}

type walDirInfo struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

type logRangeInfo struct {
	Broker      int32 `json:"broker"`
	StartOffset int64 `json:"start_offset"`
}

type producerBrief struct {
	ID           int64 `json:"id"`
	Epoch        int16 `json:"epoch"`
	LastSequence int32 `json:"last_sequence"`
}

func runPartition(ctx context.Context, args []string, w io.Writer) error {
	sub, rest, ok := subcommand(w, partitionUsage, args)
	if !ok {
		return nil
	}
	if sub != "describe" {
		return fmt.Errorf("weir partition: unknown command %q (weir partition --help)", sub)
	}
	fs := flag.NewFlagSet("weir partition describe", flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() { fmt.Fprint(w, partitionUsage); fs.PrintDefaults() }
	var k kafkaCLI
	k.bind(fs)
	part := fs.Int("partition", -1, "describe only this partition (default: all of the topic's)")
	var cc ctlConn
	cc.bindNoTimeout(fs)
	pos, help, err := parseFlags(fs, rest)
	if help || err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("weir partition describe: name one TOPIC (weir partition describe --help)")
	}
	topic := pos[0]
	cc.timeout = k.timeout
	ctx, cancel, ctl, err := cc.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	defer ctl.Close()
	t := ctl.View().Topics[topic]
	if t == nil {
		return fmt.Errorf("weir partition describe: no topic %q (UNKNOWN_TOPIC_OR_PARTITION)", topic)
	}
	var parts []metadata.Partition
	for _, p := range t.Partitions {
		if *part < 0 || p.Index == int32(*part) {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return fmt.Errorf("weir partition describe: %s has no partition %d (it has %d)", topic, *part, len(t.Partitions))
	}
	cl, adm, err := k.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	infos := describePartitions(ctx, adm, topic, parts)
	return k.emit(w, infos, func(tw io.Writer) {
		fmt.Fprintln(tw, "PARTITION\tLEADER\tLOG START\tHIGH WATERMARK\tIN OBJECTS\tIN WAL\tPRODUCERS\tLOG CHAIN")
		for _, in := range infos {
			leader := fmt.Sprintf("%d (epoch %d)", in.Leader, in.LeaderEpoch)
			if in.Leader < 0 {
				leader = fmt.Sprintf("none (epoch %d)", in.LeaderEpoch)
			}
			if in.MovingTo != nil {
				leader += fmt.Sprintf(", moving to %d", *in.MovingTo)
			}
			if in.Recovering {
				leader += ", recovering"
			}
			objects := "-"
			if in.InObjectsTo >= 0 {
				objects = fmt.Sprintf("below %d: %s in %d", in.InObjectsTo, humanBytes(float64(in.ObjectBytes)), in.Objects)
			}
			wal := fmt.Sprintf("%s in %d dirs", humanBytes(float64(in.WALBytes)), len(in.WALDirs))
			var chain []string
			for _, r := range in.LogChain {
				chain = append(chain, fmt.Sprintf("%d@%d", r.Broker, r.StartOffset))
			}
			fmt.Fprintf(tw, "%s/%d\t%s\t%d\t%d\t%s\t%s\t%d\t%s\n", in.Topic, in.Partition, leader, in.LogStart, in.HighWatermark, objects, wal, in.Producers, strings.Join(chain, " "))
		}
		for _, in := range infos {
			for _, e := range in.Errors {
				fmt.Fprintf(tw, "%s/%d: %s\n", in.Topic, in.Partition, e)
			}
		}
	})
}

// describePartitions joins the controllers' view of parts with what the brokers answer.
// A broker's failure to answer is noted in the partition's Errors, not fatal: the
// controllers' part is still worth printing.
func describePartitions(ctx context.Context, adm *kadm.Client, topic string, parts []metadata.Partition) []partitionInfo {
	infos := make([]partitionInfo, len(parts))
	set := kadm.TopicsSet{}
	for i, p := range parts {
		in := partitionInfo{Topic: topic, Partition: p.Index, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Recovering: p.Recovering, LogStart: p.LogStartOffset, HighWatermark: -1, InObjectsTo: p.UploadedThrough(),
			Objects: len(p.Objects), WALDirs: []walDirInfo{}}
		if p.Moving {
			to := p.MovingTo
			in.MovingTo = &to
		}
		for _, o := range p.Objects {
			in.ObjectBytes += o.Bytes
		}
		for _, r := range p.Logs {
			in.LogChain = append(in.LogChain, logRangeInfo{Broker: r.Broker, StartOffset: r.StartOffset})
		}
		infos[i] = in
		set.Add(topic, p.Index)
	}
	byIndex := map[int32]*partitionInfo{}
	for i := range infos {
		byIndex[infos[i].Partition] = &infos[i]
	}
	noteAll := func(what string, err error) {
		for i := range infos {
			infos[i].Errors = append(infos[i].Errors, fmt.Sprintf("%s: %v", what, err))
		}
	}
	if starts, err := adm.ListStartOffsets(ctx, topic); err != nil {
		noteAll("log start", err)
	} else {
		starts.Each(func(o kadm.ListedOffset) {
			if in := byIndex[o.Partition]; in != nil && o.Err == nil {
				in.LogStart = o.Offset
			}
		})
	}
	if ends, err := adm.ListEndOffsets(ctx, topic); err != nil {
		noteAll("high watermark", err)
	} else {
		ends.Each(func(o kadm.ListedOffset) {
			if in := byIndex[o.Partition]; in == nil {
				return
			} else if o.Err != nil {
				in.Errors = append(in.Errors, fmt.Sprintf("high watermark: %v", o.Err))
			} else {
				in.HighWatermark = o.Offset
			}
		})
	}
	dirs, err := adm.DescribeAllLogDirs(ctx, set)
	if err != nil {
		noteAll("log dirs", err)
	}
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			in := byIndex[p.Partition]
			if in == nil || p.Topic != topic || d.Dir == objectsLogDir {
				return
			}
			in.WALDirs = append(in.WALDirs, walDirInfo{Path: d.Dir, Bytes: p.Size})
			in.WALBytes += p.Size
		})
	})
	prods, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		noteAll("producers", err)
	}
	prods.EachPartition(func(p kadm.DescribedProducersPartition) {
		in := byIndex[p.Partition]
		if in == nil {
			return
		}
		if p.Err != nil {
			in.Errors = append(in.Errors, fmt.Sprintf("producers: %v", p.Err))
			return
		}
		p.ActiveProducers.Each(func(d kadm.DescribedProducer) {
			in.ProducerList = append(in.ProducerList, producerBrief{ID: d.ProducerID, Epoch: d.ProducerEpoch, LastSequence: d.LastSequence})
		})
		in.Producers = len(in.ProducerList)
	})
	for i := range infos {
		sort.Slice(infos[i].WALDirs, func(a, b int) bool { return infos[i].WALDirs[a].Path < infos[i].WALDirs[b].Path })
	}
	return infos
}

// objectsLogDir is the log dir name the brokers give object storage (broker.ObjectsLogDir).
const objectsLogDir = "objects"
