package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/security/token"
)

const adminUsage = `Usage: weir admin <command> [flags]

Commands:
  status     each controller's Raft state, leader, term and indexes; the balancer's state (moves in flight, last decision, per-broker load)
  describe   brokers (zone, epoch, state) and partitions (leader, epoch, recovery after a failover, what object storage holds, log chain)
  move       move a partition's leadership to another broker, without copying data
  drain      move every partition off a broker (--broker); it stays draining (given nothing) until it registers again
  acl        add, list or delete the cluster's ACLs (enforced by brokers run with --authorizer acl)
  traffic    bytes crossing zones per zone pair and kind, from the brokers' /metrics (--metrics); monthly cost beside Kafka's
  token      print a new random cluster token (for --cluster-token-file)
  user       SCRAM users for SASL logins: set, delete, list (weir admin user --help)

Every command but traffic and token takes --controllers (default 127.0.0.1:9401,127.0.0.1:9402,127.0.0.1:9403,
what weir dev runs), and, for a cluster with authenticated connections, --cluster-token-file (or a client
certificate: --controller-tls-cert/--controller-tls-key) and --controller-tls-ca when the controller API
is TLS. Run a command with --help for its flags.
`

func runAdmin(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" || args[0] == "help" {
		fmt.Print(adminUsage)
		return nil
	}
	if args[0] == "acl" { // admin_acls.go
		return runAdminACL(ctx, args[1:], os.Stdout)
	}
	if args[0] == "traffic" { // reads the brokers' /metrics, not the controllers
		return runAdminTraffic(ctx, args[1:], os.Stdout)
	}
	if args[0] == "token" {
		fmt.Println(token.Generate())
		return nil
	}
	if args[0] == "user" { // SCRAM users: admin_users.go
		return runAdminUser(ctx, args[1:], os.Stdout)
	}
	fs := flag.NewFlagSet("weir admin "+args[0], flag.ContinueOnError)
	controllers := fs.String("controllers", "127.0.0.1:9401,127.0.0.1:9402,127.0.0.1:9403", "comma-separated controller API addresses")
	topic := fs.String("topic", "", "move: the topic")
	partition := fs.Int("partition", -1, "move: the partition")
	to := fs.Int("to", -1, "move: the broker ID that will lead the partition")
	brokerID := fs.Int("broker", -1, "drain: the broker ID")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait")
	ccfg := ctlclient.DefaultClientConfig()
	ccfg.BindSecurityFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	ccfg.Controllers = strings.Split(*controllers, ",")
	ccfg.StartTimeout = *timeout
	cl, err := ctlclient.NewClient(ccfg)
	if err != nil {
		return err
	}
	defer cl.Close()
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	defer w.Flush()
	switch args[0] {
	case "status":
		fmt.Fprintln(w, "CONTROLLER\tSTATE\tLEADER\tTERM\tCOMMIT\tAPPLIED")
		for i, addr := range ccfg.Controllers {
			st, err := cl.Status(ctx, i)
			if err != nil {
				fmt.Fprintf(w, "%s\tunreachable: %v\n", addr, err)
				continue
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\n", addr, st.State, st.LeaderID, st.Term, st.CommitIndex, st.AppliedIndex)
		}
		bs, err := cl.Balancer(ctx)
		if err != nil {
			fmt.Fprintf(w, "\nbalancer: unknown (%v)\n", err)
			return nil
		}
		printBalancer(w, bs)
	case "describe":
		v := cl.View()
		fmt.Fprintln(w, "BROKER\tZONE\tADDRESS\tEPOCH\tSTATE")
		for _, b := range v.Brokers {
			fmt.Fprintf(w, "%d\t%s\t%s:%d\t%d\t%s\n", b.ID, b.Rack, b.Host, b.Port, b.Epoch, b.State)
		}
		fmt.Fprintln(w, "\nTOPIC\tPARTITION\tLEADER\tEPOCH\tRECOVERY\tLOG START\tIN OBJECTS\tLOG CHAIN (broker@start)")
		names := make([]string, 0, len(v.Topics))
		for n := range v.Topics {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			for _, p := range v.Topics[n].Partitions {
				var chain []string
				for _, l := range p.Logs {
					chain = append(chain, fmt.Sprintf("%d@%d", l.Broker, l.StartOffset))
				}
				moving := ""
				if p.Moving {
					moving = fmt.Sprintf(" (moving to %d)", p.MovingTo)
				}
				objects := "-"
				if len(p.Objects) > 0 {
					objects = fmt.Sprintf("below %d (%d objects)", p.UploadedThrough(), len(p.Objects))
				}
				leader := fmt.Sprint(p.Leader)
				if p.Leader < 0 {
					leader = "none"
				}
				// A failed-over partition is not served until its leader has read the
				// fenced broker's WAL (the last log range) to its end.
				recovery := "-"
				if p.Recovering {
					from := int32(-1)
					if len(p.Logs) > 0 {
						from = p.Logs[len(p.Logs)-1].Broker
					}
					recovery = fmt.Sprintf("recovering %d's epoch %d", from, p.RecoverEpoch)
				}
				fmt.Fprintf(w, "%s\t%d\t%s%s\t%d\t%s\t%d\t%s\t%s\n", n, p.Index, leader, moving, p.LeaderEpoch, recovery, p.LogStartOffset, objects, strings.Join(chain, " "))
			}
		}
	case "move":
		t := cl.View().Topics[*topic]
		if t == nil || *partition < 0 || *partition >= len(t.Partitions) || *to < 0 {
			return fmt.Errorf("move needs an existing --topic, a --partition of it and --to broker")
		}
		start := time.Now()
		if err := cl.MovePartition(ctx, t.ID, int32(*partition), int32(*to)); err != nil {
			return err
		}
		for {
			p := cl.View().Topics[*topic].Partitions[*partition]
			if p.Leader == int32(*to) && !p.Moving {
				fmt.Fprintf(w, "%s/%d now led by broker %d (leader epoch %d) after %v\n", *topic, *partition, p.Leader, p.LeaderEpoch, time.Since(start).Round(time.Millisecond))
				return nil
			}
			select {
			case <-cl.Changed():
			case <-ctx.Done():
				return fmt.Errorf("move did not complete within %v (is the current leader up?)", *timeout)
			}
		}
	case "drain":
		b, ok := cl.View().Broker(int32(*brokerID))
		if !ok || !b.Active() {
			return fmt.Errorf("drain needs --broker, the ID of a live broker")
		}
		res, err := cl.DrainRegistration(ctx, b.ID, b.Epoch)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "broker %d (epoch %d) draining: %d moves begun, %d moving already, %d recovering (moved once recovered), %d without a target\n",
			b.ID, b.Epoch, res.Moves, res.AlreadyMoving, res.Recovering, res.NoTarget)
		w.Flush()
		start := time.Now()
		for {
			n := cl.View().PartitionsLedBy(b.ID)
			if n == 0 {
				fmt.Fprintf(w, "broker %d leads nothing after %v\n", b.ID, time.Since(start).Round(time.Millisecond))
				return nil
			}
			select {
			case <-cl.Changed():
			case <-ctx.Done():
				return fmt.Errorf("broker %d still leads %d partitions after %v (are the brokers up? is the balancer on?)", b.ID, n, *timeout)
			}
		}
	default:
		return fmt.Errorf("unknown admin command %q\n\n%s", args[0], adminUsage)
	}
	return nil
}

// printBalancer prints the leader's balancer state.
func printBalancer(w io.Writer, bs ctlwire.BalancerStatus) {
	state := "off"
	if bs.Enabled {
		state = "on"
	}
	fmt.Fprintf(w, "\nBALANCER (controller %d, the leader): %s, %d moving (at most %d), a round every %v, cooldown %v, %d moves begun, imbalance %.0f%%\n",
		bs.Controller, state, bs.MovesInFlight, bs.MaxMoves, time.Duration(bs.IntervalMs)*time.Millisecond,
		time.Duration(bs.CooldownMs)*time.Millisecond, bs.MovesTotal, 100*bs.Imbalance)
	if bs.LastRound.IsZero() {
		fmt.Fprintln(w, "no decision yet")
		return
	}
	fmt.Fprintf(w, "last round %v ago: %s\n", time.Since(bs.LastRound).Round(time.Millisecond), bs.LastDecision)
	for _, m := range bs.LastMoves {
		if m.Error != "" {
			fmt.Fprintf(w, "  %s/%d %d→%d refused: %s\n", m.Topic, m.Partition, m.From, m.To, m.Error)
		}
	}
	fmt.Fprintln(w, "BROKER\tZONE\tSTATE\tLEADS\tCOST\tBYTES/S")
	for _, b := range bs.Brokers {
		st := string(b.State)
		if st == "" {
			st = "active"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%.1f\t%d\n", b.ID, b.Rack, st, b.Leads, b.Cost, b.BytesPerSec)
	}
}
