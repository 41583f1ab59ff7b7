package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// `weir group`: consumer groups through the Kafka APIs every broker serves (ListGroups,
// DescribeGroups, OffsetFetch, OffsetCommit, ListOffsets, DeleteGroups, OffsetDelete), as
// `rpk group` and `kafka-consumer-groups.sh` do. The files: group.go (dispatch, shared
// flags and errors), group_list.go (list, delete, delete-offsets), group_describe.go
// (describe with lag), group_reset.go (reset-offsets).

const groupUsage = `Usage: weir group <command> [flags]

  list                       every group: state, protocol type, members
  describe GROUP...          members, and per partition the committed offset, log end and lag
  reset-offsets GROUP ...    plan (and with --execute, commit) new offsets for a stopped group
  seek GROUP ...             the same as reset-offsets
  delete GROUP...            delete groups that have no members, with their offsets
  delete-offsets GROUP --topic T[:P,P...]
                             delete a group's committed offsets for topics or partitions

Every command takes --bootstrap, --json, --timeout and the TLS and SASL flags of a client.
Run weir group <command> --help for its flags.
`

func runGroup(ctx context.Context, args []string, w io.Writer) error {
	cmd, rest, ok := subcommand(w, groupUsage, args)
	if !ok {
		return nil
	}
	switch cmd {
	case "list":
		return runGroupList(ctx, rest, w)
	case "describe":
		return runGroupDescribe(ctx, rest, w)
	case "reset-offsets", "seek":
		return runGroupReset(ctx, cmd, rest, w)
	case "delete":
		return runGroupDelete(ctx, rest, w)
	case "delete-offsets":
		return runGroupDeleteOffsets(ctx, rest, w)
	}
	return fmt.Errorf("group: unknown command %q (weir group --help lists them)", cmd)
}

// groupCmd is a weir group subcommand: a kafkaCmd (own flags, then the shared
// connection and output flags) that keeps its positional arguments (the groups).
type groupCmd struct {
	*kafkaCmd
	pos []string
}

func newGroupCmd(name, help string, w io.Writer) *groupCmd {
	return &groupCmd{kafkaCmd: newKafkaCmd("weir group "+name, help, w)}
}

// parse parses args into the flags and c.pos; done is true after --help or an error.
func (c *groupCmd) parse(args []string) (done bool, err error) {
	c.pos, done, err = c.kafkaCmd.parse(args)
	return done || err != nil, err
}

// connect bounds ctx by --timeout and makes the admin client; stop closes both.
func (c *groupCmd) connect(ctx context.Context) (_ context.Context, _ *kadm.Client, stop func(), err error) {
	ctx, _, adm, stop, err := c.kafkaCmd.connect(ctx)
	return ctx, adm, stop, err
}

// groupErr is a broker's refusal for one group (or one of its partitions): the Kafka error
// name and what to do. errors.Is(err, kerr.X) sees the Kafka error through Unwrap.
type groupErr struct {
	group  string
	where  string // "topic/partition", or "" for the group as a whole
	detail string // what was seen, e.g. "state Stable, 1 member"; may be ""
	err    error
}

func (e *groupErr) Error() string {
	s := "group " + e.group
	if e.where != "" {
		s += " " + e.where
	}
	s += ": " + kafkaErrName(e.err)
	if e.detail != "" {
		s += " (" + e.detail + ")"
	}
	if h := groupHint(e.group, e.err); h != "" {
		s += ": " + h
	}
	return s
}

func (e *groupErr) Unwrap() error { return e.err }

// kafkaErrName is the Kafka name of err (GROUP_ID_NOT_FOUND), or its text if it is not a
// Kafka error (a connection error, a timeout).
func kafkaErrName(err error) string {
	if ke := (*kerr.Error)(nil); errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

// groupHint says what to do about err for group: the errors an operator meets with group
// commands, and Kafka's own description for the others.
func groupHint(group string, err error) string {
	switch {
	case errors.Is(err, kerr.GroupIDNotFound):
		return "no such group (weir group list shows the groups)"
	case errors.Is(err, kerr.NonEmptyGroup), errors.Is(err, kerr.UnknownMemberID),
		errors.Is(err, kerr.IllegalGeneration), errors.Is(err, kerr.RebalanceInProgress):
		return "the group has active members: stop the consumers of " + group + " first"
	case errors.Is(err, kerr.GroupSubscribedToTopic):
		return "a member of the group still subscribes to the topic: stop the consumers of " + group + " first"
	case errors.Is(err, kerr.GroupAuthorizationFailed):
		return "the principal may not use this group: grant it (weir admin acl add --group " + group + " --operation read,describe,delete ...)"
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return "the principal may not describe or read the topic: grant it (weir admin acl add --topic ...)"
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return "no such topic or partition (weir topic list shows the topics)"
	case errors.Is(err, kerr.CoordinatorNotAvailable), errors.Is(err, kerr.NotCoordinator),
		errors.Is(err, kerr.CoordinatorLoadInProgress):
		return "the group's coordinator is moving or loading: retry in a few seconds"
	}
	if ke := (*kerr.Error)(nil); errors.As(err, &ke) {
		return ke.Description
	}
	return ""
}

// errorFields are the "error" and "hint" of a JSON row that failed (empty when err is nil).
func errorFields(group string, err error) (name, hint string) {
	if err == nil {
		return "", ""
	}
	return kafkaErrName(err), groupHint(group, err)
}

// topicParts is the repeatable --topic T[:P,P...] flag: a topic, all of its partitions
// unless some are named.
type topicParts map[string][]int32

func (t topicParts) String() string {
	var s []string
	for topic, ps := range t {
		s = append(s, topic+formatPartitions(ps))
	}
	slices.Sort(s)
	return strings.Join(s, " ")
}

func (t topicParts) Set(v string) error {
	topic, list, named := strings.Cut(v, ":")
	if topic == "" {
		return errors.New("a topic name is required: T or T:P,P...")
	}
	if !named {
		t[topic] = nil
		return nil
	}
	for _, f := range strings.Split(list, ",") {
		p, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || p < 0 {
			return fmt.Errorf("%q is not a partition number (T:P,P... as in orders:0,2)", f)
		}
		t[topic] = append(t[topic], int32(p))
	}
	return nil
}

// formatPartitions is ":0,1,2" for ps, "" for none (every partition).
func formatPartitions(ps []int32) string {
	if len(ps) == 0 {
		return ""
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(int(p))
	}
	return ":" + strings.Join(s, ",")
}

// resolve turns t into the partitions it names, checking with Metadata that each topic
// and named partition exists (a typo is an error, not an empty plan).
func (t topicParts) resolve(ctx context.Context, adm *kadm.Client) (kadm.TopicsSet, error) {
	topics := make([]string, 0, len(t))
	for topic := range t {
		topics = append(topics, topic)
	}
	details, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("group: listing topics %s: %w", strings.Join(topics, ", "), err)
	}
	set := make(kadm.TopicsSet)
	for _, topic := range topics {
		d, ok := details[topic]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			return nil, fmt.Errorf("group: no topic %q (weir topic list shows the topics): %w", topic, kerr.UnknownTopicOrPartition)
		case d.Err != nil:
			return nil, fmt.Errorf("group: topic %q: %s: %w", topic, kafkaErrName(d.Err), d.Err)
		}
		if len(t[topic]) == 0 {
			for p := range d.Partitions {
				set.Add(topic, p)
			}
			continue
		}
		for _, p := range t[topic] {
			if _, ok := d.Partitions[p]; !ok {
				return nil, fmt.Errorf("group: topic %q has no partition %d (it has %d): %w", topic, p, len(d.Partitions), kerr.UnknownTopicOrPartition)
			}
			set.Add(topic, p)
		}
	}
	return set, nil
}
