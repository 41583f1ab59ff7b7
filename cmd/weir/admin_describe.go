package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// describeJSON is `weir admin describe --json`: the metadata View of version
// ViewVersion, the brokers and the partitions (of the --topic topics only, if given).
type describeJSON struct {
	ViewVersion uint64          `json:"view_version"`
	Brokers     []brokerJSON    `json:"brokers"`
	Partitions  []partitionJSON `json:"partitions"`
}

type brokerJSON struct {
	ID   int32  `json:"id"`
	Zone string `json:"zone"`
	Host string `json:"host"`
	Port int32  `json:"port"`
	// Epoch is the registration (a new one at each start); State is active, draining
	// or fenced, the field `weir admin status` shows too.
	Epoch int64  `json:"epoch"`
	State string `json:"state"`
}

type partitionJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Leader is -1 when none; MovingTo is set while a move hands leadership over.
	Leader      int32  `json:"leader"`
	LeaderEpoch int32  `json:"leader_epoch"`
	MovingTo    *int32 `json:"moving_to,omitempty"`
	// Recovering: failed over, not served until the leader has read RecoveringFrom's
	// WAL (registration RecoverEpoch) to its end.
	Recovering     bool   `json:"recovering"`
	RecoveringFrom *int32 `json:"recovering_from,omitempty"`
	RecoverEpoch   int64  `json:"recover_epoch,omitempty"`
	LogStartOffset int64  `json:"log_start_offset"`
	// Objects counts the objects in object storage; they hold the offsets below
	// UploadedThrough (-1: none uploaded).
	Objects         int     `json:"objects"`
	UploadedThrough int64   `json:"uploaded_through"`
	LogChain        []chain `json:"log_chain"`
}

// chain is one range of the partition's log: written by Broker from StartOffset.
type chain struct {
	Broker      int32 `json:"broker"`
	StartOffset int64 `json:"start_offset"`
}

func runAdminDescribe(ctx context.Context, args []string, out io.Writer) error {
	fs := adminFlags("describe", "[--topic T[,T...]] [flags]", "The brokers (zone, address, epoch, state) and, per partition, its leader and leader epoch, a move under way,\n"+
		"a recovery after a failover, the log start, what object storage holds and the log chain (which broker's WAL\n"+
		"holds which offsets).", out)
	var cc ctlConn
	cc.bind(fs)
	var topics []string
	fs.Func("topic", "only these topics' partitions (repeat the flag, or separate names with commas)", func(s string) error {
		for _, t := range strings.Split(s, ",") {
			if t = strings.TrimSpace(t); t != "" {
				topics = append(topics, t)
			}
		}
		return nil
	})
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	all := fs.Bool("all", false, "list decommissioned brokers too (retired with weir admin decommission; hidden by default)")
	_, cl, done, err := cc.start(ctx, fs, args)
	if cl == nil {
		return err
	}
	defer done()
	d, err := describeView(cl.View(), topics, *all)
	if err != nil {
		return err
	}
	return emit(out, *asJSON, d, func(w io.Writer) { printDescribe(w, d) })
}

// describeView is the View as describe shows it: every broker (decommissioned ones only
// with all), and the partitions of topics (all when empty). A topic that does not exist
// is an error naming it.
func describeView(v *metadata.View, topics []string, all bool) (describeJSON, error) {
	d := describeJSON{ViewVersion: v.Version, Brokers: []brokerJSON{}, Partitions: []partitionJSON{}}
	for _, b := range v.Brokers {
		if b.Decommissioned() && !all {
			continue
		}
		d.Brokers = append(d.Brokers, brokerJSON{ID: b.ID, Zone: b.Rack, Host: b.Host, Port: b.Port, Epoch: b.Epoch, State: string(ctlwire.StateOf(b))})
	}
	names := slices.Clone(topics)
	if len(names) == 0 {
		for n := range v.Topics {
			names = append(names, n)
		}
	}
	var missing []string
	for _, n := range names {
		if v.Topics[n] == nil {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return d, fmt.Errorf("%w: %s", metadata.ErrUnknownTopic, strings.Join(missing, ", "))
	}
	sort.Strings(names)
	names = slices.Compact(names)
	for _, n := range names {
		for _, p := range v.Topics[n].Partitions {
			pj := partitionJSON{Topic: n, Partition: p.Index, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Recovering: p.Recovering,
				LogStartOffset: p.LogStartOffset, Objects: len(p.Objects), UploadedThrough: p.UploadedThrough(), LogChain: []chain{}}
			if p.Leader < 0 {
				pj.Leader = -1
			}
			if p.Moving {
				pj.MovingTo = &p.MovingTo
			}
			for _, l := range p.Logs {
				pj.LogChain = append(pj.LogChain, chain{Broker: l.Broker, StartOffset: l.StartOffset})
			}
			if p.Recovering {
				from := int32(-1)
				if len(p.Logs) > 0 {
					from = p.Logs[len(p.Logs)-1].Broker
				}
				pj.RecoveringFrom, pj.RecoverEpoch = &from, p.RecoverEpoch
			}
			d.Partitions = append(d.Partitions, pj)
		}
	}
	return d, nil
}

// printDescribe prints describe's tables.
func printDescribe(w io.Writer, d describeJSON) {
	fmt.Fprintln(w, "BROKER\tZONE\tADDRESS\tEPOCH\tSTATE")
	for _, b := range d.Brokers {
		fmt.Fprintf(w, "%d\t%s\t%s:%d\t%d\t%s\n", b.ID, b.Zone, b.Host, b.Port, b.Epoch, b.State)
	}
	fmt.Fprintln(w, "\nTOPIC\tPARTITION\tLEADER\tEPOCH\tRECOVERY\tLOG START\tIN OBJECTS\tLOG CHAIN (broker@start)")
	for _, p := range d.Partitions {
		var chain []string
		for _, l := range p.LogChain {
			chain = append(chain, fmt.Sprintf("%d@%d", l.Broker, l.StartOffset))
		}
		leader := fmt.Sprint(p.Leader)
		if p.Leader < 0 {
			leader = "none"
		}
		if p.MovingTo != nil {
			leader += fmt.Sprintf(" (moving to %d)", *p.MovingTo)
		}
		objects := "-"
		if p.Objects > 0 {
			objects = fmt.Sprintf("below %d (%d objects)", p.UploadedThrough, p.Objects)
		}
		// A failed-over partition is not served until its leader has read the fenced
		// broker's WAL (the last log range) to its end.
		recovery := "-"
		if p.RecoveringFrom != nil {
			recovery = fmt.Sprintf("recovering %d's epoch %d", *p.RecoveringFrom, p.RecoverEpoch)
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%s\t%d\t%s\t%s\n", p.Topic, p.Partition, leader, p.LeaderEpoch, recovery, p.LogStartOffset, objects, strings.Join(chain, " "))
	}
}
