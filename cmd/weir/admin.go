package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/security/token"
)

// adminCommand is one `weir admin` subcommand: its name, the line `weir admin --help`
// shows, and what runs it (args are the subcommand's own, out is stdout). A new
// subcommand is one line in adminCommands; its flags are its own (ctlConn binds the
// shared ones).
type adminCommand struct {
	name, help string
	run        func(ctx context.Context, args []string, out io.Writer) error
}

// adminCommands is `weir admin`'s dispatch table, in the order --help lists it.
func adminCommands() []adminCommand {
	return []adminCommand{
		{"status", "each controller's Raft state, leader, term and indexes; the balancer (brokers' states and loads, imbalance, its decision)", runAdminStatus},
		{"describe", "brokers (zone, epoch, state) and partitions (leader, epoch, recovery after a failover, what object storage holds, log chain); --topic filters", runAdminDescribe},
		{"move", "move a partition's leadership to another broker, without copying data", runAdminMove},
		{"drain", "move every partition off a broker (--broker); it stays draining (given nothing) until it registers again or is undrained", brokerCommand("drain", drainHelp, adminDrain)},
		{"undrain", "take a broker out of draining (--broker): it is given partitions again", brokerCommand("undrain", "Takes broker ID out of draining: it may be given partitions again (placement, failover, moves, the balancer).", adminUndrain)},
		{"decommission", "retire a stopped (fenced) broker for good (--broker): it leaves every listing", brokerCommand("decommission",
			"Retires broker ID, stopped for good: it must be fenced (its process stopped, its lease run out) and lead\nnothing. It leaves Kafka's Metadata and every listing; its WAL directories are deleted once object storage\nholds their data.", adminDecommission)},
		{"acl", "add, list or delete the cluster's ACLs (enforced by brokers run with --authorizer acl)", runAdminACL},
		{"traffic", "bytes crossing zones per zone pair and kind, from the brokers' /metrics (--metrics); monthly cost beside Kafka's", runAdminTraffic},
		{"cost", "a monthly bill by line for a workload (or the running cluster's, --metrics) on Weir, beside Apache Kafka and AutoMQ", runAdminCost},
		{"token", "print a new random cluster token (for --cluster-token-file)", runAdminToken},
		{"user", "SCRAM users for SASL logins: set, delete, list (weir admin user --help)", runAdminUser},
	}
}

// adminUsage is `weir admin --help`: the table's commands and the shared flags.
func adminUsage() string {
	var b strings.Builder
	b.WriteString("Usage: weir admin <command> [flags]\n\nCommands:\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, c := range adminCommands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.help)
	}
	tw.Flush()
	b.WriteString(`
Every command but traffic, cost and token talks to the controllers and takes --controllers
(default ` + defaultControllers + `, what weir dev runs), --timeout, and, for a cluster
with authenticated connections, --cluster-token-file (or a client certificate:
--controller-tls-cert/--controller-tls-key) and --controller-tls-ca when the controller API
is TLS. A controller that cannot be used is named with what to do (connection refused,
speaks TLS, unknown CA, 401); while they are unreachable the command reports on stderr
every few seconds. Run a command with --help for its flags.
`)
	return b.String()
}

// runAdmin dispatches `weir admin <command>`.
func runAdmin(ctx context.Context, args []string, out io.Writer) error {
	name, rest, ok := subcommand(out, adminUsage(), args)
	if !ok {
		return nil
	}
	for _, c := range adminCommands() {
		if c.name == name {
			return c.run(ctx, rest, out)
		}
	}
	return fmt.Errorf("unknown admin command %q\n\n%s", name, adminUsage())
}

func runAdminToken(_ context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("weir admin token", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprint(out, "Usage: weir admin token\n\nPrints a new random cluster token, one line, for --cluster-token-file.\n")
	}
	if _, help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	fmt.Fprintln(out, token.Generate())
	return nil
}

// adminDownGrace is how long an admin command waits for controllers with nothing
// listening: a controller restarting comes back within it; a wrong --controllers is
// reported then, not after --timeout.
const adminDownGrace = 3 * time.Second

// defaultControllers is what `weir dev` (and `make run`) runs.
const defaultControllers = "127.0.0.1:9401,127.0.0.1:9402,127.0.0.1:9403"

// ctlConn is what every admin command that talks to the controllers shares: where they
// are, how long to wait, the client's credentials (ctlclient's BindSecurityFlags), and
// where the wait is reported.
type ctlConn struct {
	controllers string
	timeout     time.Duration
	cfg         ctlclient.ClientConfig
	// progress receives the wait's reports (stderr).
	progress io.Writer
}

// bind registers --controllers, --timeout and the security flags on fs.
func (cc *ctlConn) bind(fs *flag.FlagSet) {
	cc.bindNoTimeout(fs)
	fs.DurationVar(&cc.timeout, "timeout", 30*time.Second, "how long the command may take, the wait for the controllers included")
}

// bindNoTimeout registers --controllers and the security flags, for a command whose
// --timeout is bound elsewhere (weir partition: kafkaCLI's); it sets cc.timeout.
func (cc *ctlConn) bindNoTimeout(fs *flag.FlagSet) {
	cc.cfg = ctlclient.DefaultClientConfig()
	cc.progress = os.Stderr
	fs.StringVar(&cc.controllers, "controllers", defaultControllers, "comma-separated controller API addresses (host:port); any one that answers will do")
	cc.cfg.BindSecurityFlags(fs)
}

// connect returns a client of the controllers and ctx bounded by --timeout; the caller
// calls cancel and closes the client. It fails at once when every controller answers
// in a way waiting cannot fix, after adminDownGrace when nothing listens, naming each
// controller and what to do; meanwhile it reports on progress every few seconds.
func (cc *ctlConn) connect(ctx context.Context) (context.Context, context.CancelFunc, *ctlclient.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, cc.timeout)
	cfg := cc.cfg
	cfg.Controllers = cc.addrs()
	cfg.StartTimeout, cfg.DownGrace = cc.timeout, adminDownGrace
	if cc.progress != nil {
		cfg.OnWaiting = func(waited time.Duration, status string) {
			fmt.Fprintf(cc.progress, "waiting for controllers (%v of %v): %s\n", waited.Round(time.Second), cc.timeout, status)
		}
	}
	cl, err := ctlclient.NewClient(cfg)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, cancel, cl, nil
}

// start parses args into fs (flags and positional arguments in any order) and connects
// (connect). cl is nil when it did not connect: --help was printed (err nil) or err says
// why. Otherwise the caller defers done, which closes the client and cancels ctx.
func (cc *ctlConn) start(ctx context.Context, fs *flag.FlagSet, args []string) (_ context.Context, cl *ctlclient.Client, done func(), err error) {
	if _, help, err := parseFlags(fs, args); help || err != nil {
		return ctx, nil, nil, err
	}
	ctx, cancel, cl, err := cc.connect(ctx)
	if err != nil {
		return ctx, nil, nil, err
	}
	return ctx, cl, func() { cl.Close(); cancel() }, nil
}

// addrs is --controllers, split.
func (cc *ctlConn) addrs() []string {
	var out []string
	for _, a := range strings.Split(cc.controllers, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// adminFlags makes the flag set of `weir admin <name>`: its usage line and help, then
// its flags, all written to out.
func adminFlags(name, usage, help string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("weir admin "+name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: weir admin %s %s\n\n%s\n\nFlags:\n", name, usage, help)
		fs.PrintDefaults()
	}
	return fs
}
