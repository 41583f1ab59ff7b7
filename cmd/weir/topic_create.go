package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

const topicCreateHelp = `Usage: weir topic create NAME... [flags]

Creates the topics (CreateTopics). Without --partitions or --replication-factor the
broker's defaults apply. Each topic is printed with what the broker answered: its
partition count, its replication factor and its ID, or the Kafka error and a hint.

Replication: Weir keeps one copy of each partition, in the shared WAL and object
storage; durability comes from that shared storage, not from replicas on other brokers.
The replication factor printed is the broker's answer, whatever was asked: 1, with a
note saying so when more was asked (docs/OPERATIONS.md, Replication factor).

Examples:
  weir topic create orders --partitions 6
  weir topic create audit --config retention.ms=86400000 --config cleanup.policy=compact
  weir topic create orders --partitions 6 --dry-run
`

// createdTopic is one row of weir topic create.
type createdTopic struct {
	Topic             string `json:"topic"`
	TopicID           string `json:"topic_id,omitempty"`
	Status            string `json:"status"` // created, valid (--dry-run), failed
	Partitions        int32  `json:"partitions"`
	ReplicationFactor int16  `json:"replication_factor"`
	// Note is what the broker said beside a success (a replication factor above 1
	// recorded as 1, and why).
	Note string `json:"note,omitempty"`
	itemErr
}

func runTopicCreate(ctx context.Context, args []string, w io.Writer) error {
	const cmd = "topic create"
	c := newKafkaCmd("weir topic create", topicCreateHelp, w)
	partitions := c.fs.Int("partitions", -1, "partitions of each topic; -1: the broker's num.partitions")
	rf := c.fs.Int("replication-factor", -1, "replication factor to ask for; -1: the broker's default.replication.factor. See Replication above")
	configs := kvFlag{}
	c.fs.Var(configs, "config", "a topic config `key=value` (repeat the flag for more; weir config describe --topic T --all lists the keys)")
	dry := c.fs.Bool("dry-run", false, "ask the broker to validate the request without creating anything (validate_only)")
	names, help, err := c.parse(args)
	if help || err != nil {
		return err
	}
	if err := needNames(cmd, names); err != nil {
		return err
	}
	if *partitions == 0 || *partitions < -1 || *rf == 0 || *rf < -1 || *rf > 1<<15-1 {
		return fmt.Errorf("%s: --partitions and --replication-factor are positive (or -1: the broker's default)", cmd)
	}
	ctx, _, adm, done, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	create := adm.CreateTopics
	if *dry {
		create = adm.ValidateCreateTopics
	}
	resp, err := create(ctx, int32(*partitions), int16(*rf), configs, names...)
	if err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	var rows []createdTopic
	var fail failures
	for _, n := range names {
		row := createdTopic{Topic: n, Status: "created", Partitions: -1, ReplicationFactor: -1}
		if r, ok := resp[n]; !ok {
			row.itemErr = newItemErr(errNoAnswer, "", n, "")
		} else {
			row.itemErr = newItemErr(r.Err, r.ErrMessage, n, "")
			row.TopicID, row.Partitions, row.ReplicationFactor = topicID(r.ID), r.NumPartitions, r.ReplicationFactor
			if r.Err == nil {
				row.Note = r.ErrMessage
			}
		}
		switch {
		case row.failed():
			row.Status = "failed"
		case *dry:
			row.Status = "valid"
		}
		fail.add(n, row.itemErr)
		rows = append(rows, row)
	}
	err = c.emit(w, rows, func(tw io.Writer) {
		fmt.Fprintln(tw, "TOPIC\tSTATUS\tPARTITIONS\tREPLICATION FACTOR\tID\tERROR")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Topic, r.Status, count(int64(r.Partitions)), count(int64(r.ReplicationFactor)), dash(r.TopicID), r.cell())
		}
		for _, r := range rows {
			if r.Note != "" {
				fmt.Fprintf(tw, "%s: %s\n", r.Topic, r.Note)
			}
		}
	})
	if err != nil {
		return err
	}
	return fail.err(cmd, "topics")
}

// errNoAnswer: the broker's response left out an item that was asked for.
var errNoAnswer = errors.New("weir: the broker's answer left it out")

// kvFlag is a repeatable key=value flag (--config), as CreateTopics takes configs.
type kvFlag map[string]*string

func (f kvFlag) String() string {
	var kv []string
	for k, v := range f {
		kv = append(kv, k+"="+*v)
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

func (f kvFlag) Set(s string) error {
	k, v, err := parseKV(s)
	if err != nil {
		return err
	}
	f[k] = &v
	return nil
}

// parseKV splits key=value (the value may hold '=' and be empty; the key may not).
func parseKV(s string) (string, string, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return "", "", fmt.Errorf("%q is not key=value", s)
	}
	return k, v, nil
}

// topicID prints an ID as Kafka's tools do (URL-safe base64, unpadded); "" for none.
func topicID(id kadm.TopicID) string {
	if id == (kadm.TopicID{}) {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// count prints a number the broker answered, "-" for its -1 (none, unknown).
func count(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}
