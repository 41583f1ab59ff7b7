package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/weir-io/weir/controller/ctlwire"
)

// statusJSON is `weir admin status --json`.
type statusJSON struct {
	Controllers []controllerStatusJSON `json:"controllers"`
	// Balancer is the leader's (nil when it did not answer: BalancerError says why).
	Balancer      *ctlwire.BalancerStatus `json:"balancer,omitempty"`
	BalancerError string                  `json:"balancer_error,omitempty"`
}

// controllerStatusJSON is one controller: its status, or why it did not answer.
type controllerStatusJSON struct {
	Address string `json:"address"`
	*ctlwire.Status
	Error string `json:"error,omitempty"`
}

func runAdminStatus(ctx context.Context, args []string, out io.Writer) error {
	fs := adminFlags("status", "[flags]", "Each controller's Raft state, leader, term and indexes, then the balancer as the leader runs it:\n"+
		"the brokers' states (as describe shows them) and loads, the imbalance, and what a round would decide now\n"+
		"(with why an imbalance is left), then the last round's decision.", out)
	var cc ctlConn
	cc.bind(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of tables (the balancer's fields as GET /v1/balancer answers them)")
	ctx, cl, done, err := cc.start(ctx, fs, args)
	if cl == nil {
		return err
	}
	defer done()
	var st statusJSON
	for i, addr := range cc.addrs() {
		s, err := cl.Status(ctx, i)
		cs := controllerStatusJSON{Address: addr}
		if err != nil {
			cs.Error = err.Error()
		} else {
			cs.Status = &s
		}
		st.Controllers = append(st.Controllers, cs)
	}
	if bs, err := cl.Balancer(ctx); err != nil {
		st.BalancerError = err.Error()
	} else {
		st.Balancer = &bs
	}
	return emit(out, *asJSON, st, func(w io.Writer) {
		fmt.Fprintln(w, "CONTROLLER\tSTATE\tLEADER\tTERM\tCOMMIT\tAPPLIED")
		for _, c := range st.Controllers {
			if c.Status == nil {
				fmt.Fprintf(w, "%s\tunreachable: %s\n", c.Address, c.Error)
				continue
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\n", c.Address, c.State, c.LeaderID, c.Term, c.CommitIndex, c.AppliedIndex)
		}
		if st.Balancer == nil {
			fmt.Fprintf(w, "\nbalancer: unknown (%s)\n", st.BalancerError)
			return
		}
		printBalancer(w, *st.Balancer, time.Now())
	})
}

// printBalancer prints the leader's balancer state: the imbalance and the decision
// beside it come from one plan of the current View (controller/balancer.go status), as
// do the brokers' states, which are describe's.
func printBalancer(w io.Writer, bs ctlwire.BalancerStatus, now time.Time) {
	state := "off"
	if bs.Enabled {
		state = "on"
	}
	fmt.Fprintf(w, "\nBALANCER (controller %d, the leader): %s, %d moving (at most %d), a round every %v, cooldown %v, %d moves begun\n",
		bs.Controller, state, bs.MovesInFlight, bs.MaxMoves, time.Duration(bs.IntervalMs)*time.Millisecond,
		time.Duration(bs.CooldownMs)*time.Millisecond, bs.MovesTotal)
	fmt.Fprintf(w, "now (metadata version %d): imbalance %.0f%%; %s\n", bs.ViewVersion, 100*bs.Imbalance, bs.Decision)
	if bs.LastRound.IsZero() {
		fmt.Fprintln(w, "last round: none yet")
	} else {
		fmt.Fprintf(w, "last round %v ago: %s\n", now.Sub(bs.LastRound).Round(time.Millisecond), bs.LastDecision)
	}
	for _, m := range bs.LastMoves {
		if m.Error != "" {
			fmt.Fprintf(w, "  %s/%d %d→%d refused: %s\n", m.Topic, m.Partition, m.From, m.To, m.Error)
		}
	}
	fmt.Fprintln(w, "BROKER\tZONE\tSTATE\tLEADS\tCOST\tBYTES/S")
	for _, b := range bs.Brokers {
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%.1f\t%d\n", b.ID, b.Rack, b.State, b.Leads, b.Cost, b.BytesPerSec)
	}
}
