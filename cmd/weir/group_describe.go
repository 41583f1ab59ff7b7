package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// weir group describe: a group's members and its lag, per partition and in total.

const groupDescribeHelp = `Usage: weir group describe GROUP... [flags]

Shows each group's state, coordinator broker, protocol and members (member id, client id,
host, assigned partitions), and per partition it has committed to or is assigned:

  COMMITTED  the group's committed offset (OffsetFetch; "-" if none yet)
  LOG-END    the partition's high watermark (ListOffsets)
  LAG        LOG-END - COMMITTED: records the group has yet to consume (without a commit:
             LOG-END - log start, what a consumer starting from the earliest offset reads)
  MEMBER-ID  the member the partition is assigned to ("-" when none, e.g. Empty)

and the group's total lag. A share group (KIP-932) shows its group and assignment
epochs, its members' epochs, and per partition it has state for or is assigned:

  START-OFFSET  the share-partition start offset (DescribeShareGroupOffsets): every
                record below it is acknowledged or archived ("-" if none yet)
  LOG-END       the partition's high watermark
  LAG           LOG-END - START-OFFSET: records not yet done, those in flight included
  MEMBER-ID     the members assigned the partition (several may share one)

The exit code is 1 if a group could not be described (for example GROUP_ID_NOT_FOUND).
`

// groupDescription is one group of weir group describe --json.
type groupDescription struct {
	Group string `json:"group"`
	// Type is "share" for a share group (group_share.go), empty for the others.
	Type         string           `json:"type,omitempty"`
	State        string           `json:"state"`
	Coordinator  int32            `json:"coordinator"`
	ProtocolType string           `json:"protocol_type"`
	Protocol     string           `json:"protocol"`
	Members      []groupMember    `json:"members"`
	Partitions   []groupPartition `json:"partitions"`
	TotalLag     int64            `json:"total_lag"`
	// A share group's epochs.
	GroupEpoch      int32  `json:"group_epoch,omitempty"`
	AssignmentEpoch int32  `json:"assignment_epoch,omitempty"`
	Error           string `json:"error,omitempty"`
	Hint            string `json:"hint,omitempty"`
}

type groupMember struct {
	MemberID   string        `json:"member_id"`
	InstanceID string        `json:"instance_id,omitempty"`
	ClientID   string        `json:"client_id"`
	Host       string        `json:"host"`
	Assigned   []memberTopic `json:"assigned"`
	// A share group member's epoch and rack.
	MemberEpoch int32  `json:"member_epoch,omitempty"`
	Rack        string `json:"rack,omitempty"`
}

type memberTopic struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// groupPartition is one partition's offsets and lag; -1 means unknown (no commit, or an
// error, named in Error).
type groupPartition struct {
	Topic           string `json:"topic"`
	Partition       int32  `json:"partition"`
	CommittedOffset int64  `json:"committed_offset"`
	// StartOffset is a share group's share-partition start offset (-1: none yet).
	StartOffset    *int64 `json:"start_offset,omitempty"`
	LogStartOffset int64  `json:"log_start_offset"`
	LogEndOffset   int64  `json:"log_end_offset"`
	Lag            int64  `json:"lag"`
	MemberID       string `json:"member_id,omitempty"`
	ClientID       string `json:"client_id,omitempty"`
	Host           string `json:"host,omitempty"`
	Error          string `json:"error,omitempty"`
}

func runGroupDescribe(ctx context.Context, args []string, w io.Writer) error {
	c := newGroupCmd("describe", groupDescribeHelp, w)
	if done, err := c.parse(args); done {
		return err
	}
	groups := uniq(c.pos)
	if len(groups) == 0 {
		return errors.New("group describe needs at least one GROUP (weir group list shows them)")
	}
	ctx, adm, stop, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer stop()
	shares, errs := describeShareGroups(ctx, adm, groups)
	var classic []string
	for _, g := range groups {
		if _, ok := shares[g]; !ok {
			classic = append(classic, g)
		}
	}
	// Lag: DescribeGroups, OffsetFetch, then ListOffsets (start and end) of every partition
	// the groups are assigned or committed to.
	lags := kadm.DescribedGroupLags{}
	if len(classic) > 0 {
		if lags, err = adm.Lag(ctx, classic...); err != nil {
			return fmt.Errorf("group: describing %s: %w", strings.Join(classic, ", "), err)
		}
	}
	var out []groupDescription
	for _, g := range groups {
		if d, ok := shares[g]; ok {
			out = append(out, d)
			continue
		}
		l, ok := lags[g]
		gerr := l.Error()
		if !ok {
			gerr = errors.New("no answer for the group")
		}
		if gerr != nil {
			d := groupDescription{Group: g, Members: []groupMember{}, Partitions: []groupPartition{}}
			d.Error, d.Hint = errorFields(g, gerr)
			out = append(out, d)
			errs = append(errs, &groupErr{group: g, err: gerr})
			continue
		}
		out = append(out, describeLag(l))
	}
	if err := c.emit(w, out, func(tw io.Writer) { printDescriptions(tw, out) }); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// describeLag turns kadm's answer into the output's shape.
func describeLag(l kadm.DescribedGroupLag) groupDescription {
	d := groupDescription{
		Group: l.Group, State: l.State, Coordinator: l.Coordinator.NodeID,
		ProtocolType: l.ProtocolType, Protocol: l.Protocol, TotalLag: l.Lag.Total(),
		Members: []groupMember{}, Partitions: []groupPartition{},
	}
	for _, m := range l.Members {
		gm := groupMember{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, Assigned: []memberTopic{}}
		if m.InstanceID != nil {
			gm.InstanceID = *m.InstanceID
		}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				gm.Assigned = append(gm.Assigned, memberTopic{Topic: t.Topic, Partitions: t.Partitions})
			}
		}
		d.Members = append(d.Members, gm)
	}
	for _, p := range l.Lag.Sorted() {
		gp := groupPartition{
			Topic: p.Topic, Partition: p.Partition, CommittedOffset: p.Commit.At,
			LogStartOffset: -1, LogEndOffset: -1, Lag: p.Lag,
		}
		if p.Start.Err == nil {
			gp.LogStartOffset = p.Start.Offset
		}
		if p.End.Err == nil {
			gp.LogEndOffset = p.End.Offset
		}
		if p.Member != nil {
			gp.MemberID, gp.ClientID, gp.Host = p.Member.MemberID, p.Member.ClientID, p.Member.ClientHost
		}
		if p.Err != nil {
			gp.Error = kafkaErrName(p.Err)
		}
		d.Partitions = append(d.Partitions, gp)
	}
	return d
}

// printDescriptions writes the tables of weir group describe: a header per group, its
// members, its partitions; blank lines keep the column widths of each part apart.
func printDescriptions(tw io.Writer, ds []groupDescription) {
	for i, d := range ds {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		if d.Type == "share" && d.State != "" {
			printShareDescription(tw, d)
			continue
		}
		if d.Error != "" {
			fmt.Fprintf(tw, "GROUP\t%s\nERROR\t%s: %s\n", d.Group, d.Error, d.Hint)
			continue
		}
		protocol := dash(d.ProtocolType)
		if d.Protocol != "" {
			protocol += " (" + d.Protocol + ")"
		}
		fmt.Fprintf(tw, "GROUP\t%s\nCOORDINATOR\t%d\nSTATE\t%s\nPROTOCOL\t%s\nMEMBERS\t%d\nTOTAL-LAG\t%d\n",
			d.Group, d.Coordinator, d.State, protocol, len(d.Members), d.TotalLag)
		if len(d.Members) > 0 {
			fmt.Fprintln(tw, "\nMEMBER-ID\tCLIENT-ID\tHOST\tASSIGNED")
			for _, m := range d.Members {
				var as []string
				for _, a := range m.Assigned {
					as = append(as, a.Topic+formatPartitions(a.Partitions))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.MemberID, m.ClientID, m.Host, dash(strings.Join(as, " ")))
			}
		}
		if len(d.Partitions) > 0 {
			fmt.Fprintln(tw, "\nTOPIC\tPARTITION\tCOMMITTED\tLOG-END\tLAG\tMEMBER-ID\tCLIENT-ID\tHOST")
			for _, p := range d.Partitions {
				lag := offsetCell(p.Lag)
				if p.Error != "" {
					lag = p.Error
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Topic, p.Partition,
					offsetCell(p.CommittedOffset), offsetCell(p.LogEndOffset), lag, dash(p.MemberID), dash(p.ClientID), dash(p.Host))
			}
		}
	}
}

// offsetCell is an offset or lag for a table: "-" for -1 (none, unknown).
func offsetCell(o int64) string {
	if o < 0 {
		return "-"
	}
	return fmt.Sprint(o)
}
