package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// weir group list and describe for share groups (KIP-932): ShareGroupDescribe for their
// members and epochs, DescribeShareGroupOffsets for each partition's share-partition
// start offset (every record below it is acknowledged or archived), ListOffsets for the
// log end. Their LAG is LOG-END - START-OFFSET: records not yet done, those in flight
// (acquired, or released for redelivery) included.

// shareMemberCounts returns the member count of each listed share group (groups that
// could not be described are left out).
func shareMemberCounts(ctx context.Context, adm *kadm.Client, groups []string) map[string]int {
	out := map[string]int{}
	if len(groups) == 0 {
		return out
	}
	described, _ := adm.DescribeShareGroups(ctx, groups...)
	for g, d := range described {
		if d.Err == nil {
			out[g] = len(d.Members)
		}
	}
	return out
}

// describeShareGroups describes those of groups that are share groups; the others (not
// share groups, or a cluster without them) are left to the classic describe.
func describeShareGroups(ctx context.Context, adm *kadm.Client, groups []string) (map[string]groupDescription, []error) {
	described, err := adm.DescribeShareGroups(ctx, groups...)
	if err != nil && len(described) == 0 {
		return nil, nil // no share groups served (or none of these): the classic path says why
	}
	var share []string
	for _, g := range groups {
		if d, ok := described[g]; ok && !errors.Is(d.Err, kerr.GroupIDNotFound) {
			share = append(share, g)
		}
	}
	if len(share) == 0 {
		return nil, nil
	}
	offsets, _ := adm.DescribeShareGroupOffsets(ctx, share...)
	topics := map[string]bool{}
	for _, g := range share {
		for t := range offsets[g].Offsets {
			topics[t] = true
		}
		for _, m := range described[g].Members {
			for t := range m.Assignment {
				topics[t] = true
			}
		}
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	var ends kadm.ListedOffsets
	if len(names) > 0 {
		ends, _ = adm.ListEndOffsets(ctx, names...)
	}
	out := map[string]groupDescription{}
	var errs []error
	for _, g := range share {
		d := described[g]
		gd := groupDescription{Group: g, Type: "share", Members: []groupMember{}, Partitions: []groupPartition{}}
		if d.Err != nil {
			gd.Error, gd.Hint = errorFields(g, d.Err)
			errs = append(errs, &groupErr{group: g, err: d.Err})
			out[g] = gd
			continue
		}
		gd.State, gd.Coordinator, gd.ProtocolType, gd.Protocol = d.GroupState, d.Coordinator.NodeID, "share", d.Assignor
		gd.GroupEpoch, gd.AssignmentEpoch = d.GroupEpoch, d.AssignmentEpoch
		owner := map[string]map[int32][]kadm.ShareGroupMember{}
		for _, m := range d.Members {
			gm := groupMember{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost, MemberEpoch: m.MemberEpoch, Assigned: []memberTopic{}}
			if m.RackID != nil {
				gm.Rack = *m.RackID
			}
			for _, tp := range m.Assignment.Sorted() {
				gm.Assigned = append(gm.Assigned, memberTopic{Topic: tp.Topic, Partitions: tp.Partitions})
				for _, p := range tp.Partitions {
					if owner[tp.Topic] == nil {
						owner[tp.Topic] = map[int32][]kadm.ShareGroupMember{}
					}
					owner[tp.Topic][p] = append(owner[tp.Topic][p], m)
				}
			}
			gd.Members = append(gd.Members, gm)
		}
		o := offsets[g]
		if o.Err != nil {
			gd.Error, gd.Hint = errorFields(g, o.Err)
		}
		parts := map[string]map[int32]bool{}
		for t, ps := range o.Offsets {
			for p := range ps {
				if parts[t] == nil {
					parts[t] = map[int32]bool{}
				}
				parts[t][p] = true
			}
		}
		for t, ps := range owner {
			for p := range ps {
				if parts[t] == nil {
					parts[t] = map[int32]bool{}
				}
				parts[t][p] = true
			}
		}
		for _, t := range sortedKeys(parts) {
			ps := make([]int32, 0, len(parts[t]))
			for p := range parts[t] {
				ps = append(ps, p)
			}
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			for _, p := range ps {
				gp := groupPartition{Topic: t, Partition: p, CommittedOffset: -1, LogStartOffset: -1, LogEndOffset: -1, Lag: -1}
				start := int64(-1)
				if so, ok := o.Offsets.Lookup(t, p); ok {
					start = so.StartOffset
					if so.Err != nil {
						gp.Error = kafkaErrName(so.Err)
					}
				}
				gp.StartOffset = &start
				if e, ok := ends.Lookup(t, p); ok && e.Err == nil {
					gp.LogEndOffset = e.Offset
					if start >= 0 {
						gp.Lag = max(e.Offset-start, 0)
						gd.TotalLag += gp.Lag
					}
				}
				var ids, clients, hosts []string
				for _, m := range owner[t][p] {
					ids, clients, hosts = append(ids, m.MemberID), append(clients, m.ClientID), append(hosts, m.ClientHost)
				}
				gp.MemberID, gp.ClientID, gp.Host = strings.Join(ids, ","), strings.Join(clients, ","), strings.Join(hosts, ",")
				gd.Partitions = append(gd.Partitions, gp)
			}
		}
		out[g] = gd
	}
	return out, errs
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// printShareDescription writes one share group of weir group describe.
func printShareDescription(tw io.Writer, d groupDescription) {
	fmt.Fprintf(tw, "GROUP\t%s\nCOORDINATOR\t%d\nSTATE\t%s\nTYPE\tshare (assignor %s)\nGROUP-EPOCH\t%d\nASSIGNMENT-EPOCH\t%d\nMEMBERS\t%d\nTOTAL-LAG\t%d\n",
		d.Group, d.Coordinator, d.State, dash(d.Protocol), d.GroupEpoch, d.AssignmentEpoch, len(d.Members), d.TotalLag)
	if d.Error != "" {
		fmt.Fprintf(tw, "ERROR\t%s: %s\n", d.Error, d.Hint)
	}
	if len(d.Members) > 0 {
		fmt.Fprintln(tw, "\nMEMBER-ID\tCLIENT-ID\tHOST\tEPOCH\tASSIGNED")
		for _, m := range d.Members {
			var as []string
			for _, a := range m.Assigned {
				as = append(as, a.Topic+formatPartitions(a.Partitions))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", m.MemberID, m.ClientID, m.Host, m.MemberEpoch, dash(strings.Join(as, " ")))
		}
	}
	if len(d.Partitions) > 0 {
		fmt.Fprintln(tw, "\nTOPIC\tPARTITION\tSTART-OFFSET\tLOG-END\tLAG\tMEMBER-ID")
		for _, p := range d.Partitions {
			lag := offsetCell(p.Lag)
			if p.Error != "" {
				lag = p.Error
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", p.Topic, p.Partition, offsetCell(*p.StartOffset), offsetCell(p.LogEndOffset), lag, dash(p.MemberID))
		}
	}
}
