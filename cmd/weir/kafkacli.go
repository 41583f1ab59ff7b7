package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/bench"
)

// kafkaCLI is what every command that talks to the brokers over the Kafka protocol
// (weir topic, group, config) shares: where the cluster is, how to connect to a secured
// listener (bench.ClientSecurity: TLS, SASL), how long to wait, and table or JSON output.
// The controllers are not involved: these commands use the Kafka APIs any Kafka tool uses,
// so they work wherever a client does, with the client's ACLs.
type kafkaCLI struct {
	bootstrap string
	sec       bench.ClientSecurity
	timeout   time.Duration
	json      bool
}

// defaultBootstrap is what `weir dev` (and `make run`) listens on.
const defaultBootstrap = "127.0.0.1:9092"

// bind registers --bootstrap, --timeout, --json and the client security flags on fs.
func (k *kafkaCLI) bind(fs *flag.FlagSet) {
	fs.StringVar(&k.bootstrap, "bootstrap", defaultBootstrap, "comma-separated Kafka addresses of the brokers (any one will do)")
	fs.DurationVar(&k.timeout, "timeout", 30*time.Second, "how long to wait for the cluster")
	fs.BoolVar(&k.json, "json", false, "print JSON instead of a table")
	k.sec.BindFlags(fs)
}

// client connects; the caller closes the client. Nothing is sent until the first request.
func (k *kafkaCLI) client(extra ...kgo.Opt) (*kgo.Client, *kadm.Client, error) {
	opts, err := k.sec.Opts()
	if err != nil {
		return nil, nil, err
	}
	opts = append(opts, kgo.SeedBrokers(strings.Split(k.bootstrap, ",")...), kgo.RequestRetries(3))
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, nil, err
	}
	return cl, kadm.NewClient(cl), nil
}

// ctx bounds one command by --timeout.
func (k *kafkaCLI) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, k.timeout)
}

// emit prints v as indented JSON with --json, else the table table writes (tab-separated
// columns, aligned here).
func (k *kafkaCLI) emit(w io.Writer, v any, table func(tw io.Writer)) error {
	return emit(w, k.json, v, table)
}

// emit is kafkaCLI.emit for commands with a --json flag of their own.
func emit(w io.Writer, asJSON bool, v any, table func(tw io.Writer)) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// parseFlags parses args into fs, flags and positional arguments in any order (`weir topic
// create orders --partitions 6` as well as `--partitions 6 orders`; after "--" all are
// positional). A --help is not an error: the usage was printed and help is true.
func parseFlags(fs *flag.FlagSet, args []string) (positional []string, help bool, err error) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, true, nil
			}
			return nil, false, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, false, nil
		}
		if len(args) > 0 && len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			return append(positional, rest...), false, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// subcommand prints usage (a command's list of subcommands) when args asks for help or
// is empty; otherwise it returns the subcommand and its arguments.
func subcommand(w io.Writer, usage string, args []string) (string, []string, bool) {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" || args[0] == "help" {
		fmt.Fprint(w, usage)
		return "", nil, false
	}
	return args[0], args[1:], true
}

// dash is s, or "-" for an empty table cell, so columns stay aligned.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
