package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkaCmd is one subcommand of weir topic or weir config: its own flags, then kafkaCLI's
// (connection, security, output). --help prints the command's text, its own flags, then
// the shared ones apart, so an operator sees at once what this command takes.
type kafkaCmd struct {
	kafkaCLI
	fs   *flag.FlagSet
	help string
	w    io.Writer
}

func newKafkaCmd(name, help string, w io.Writer) *kafkaCmd {
	c := &kafkaCmd{fs: flag.NewFlagSet(name, flag.ContinueOnError), help: help, w: w}
	c.fs.SetOutput(w)
	return c
}

// parse binds the shared flags (after the command's own, which the caller registered)
// and parses args; help is true when --help was asked (the usage is printed).
func (c *kafkaCmd) parse(args []string) (positional []string, help bool, err error) {
	own := map[string]bool{}
	c.fs.VisitAll(func(f *flag.Flag) { own[f.Name] = true })
	c.bind(c.fs)
	c.fs.Usage = func() {
		fmt.Fprint(c.w, c.help)
		if len(own) > 0 {
			fmt.Fprintln(c.w, "\nFlags:")
			c.printFlags(func(name string) bool { return own[name] })
		}
		fmt.Fprintln(c.w, "\nConnection and output flags:")
		c.printFlags(func(name string) bool { return !own[name] })
	}
	return parseFlags(c.fs, args)
}

// printFlags prints the flags keep selects, with their help and defaults.
func (c *kafkaCmd) printFlags(keep func(string) bool) {
	sub := flag.NewFlagSet("", flag.ContinueOnError)
	sub.SetOutput(c.w)
	c.fs.VisitAll(func(f *flag.Flag) {
		if keep(f.Name) {
			sub.Var(f.Value, f.Name, f.Usage)
			sub.Lookup(f.Name).DefValue = f.DefValue
		}
	})
	sub.PrintDefaults()
}

// connect opens the client and bounds the command by --timeout; done closes both.
func (c *kafkaCmd) connect(parent context.Context) (ctx context.Context, cl *kgo.Client, adm *kadm.Client, done func(), err error) {
	cl, adm, err = c.client()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ctx, cancel := c.ctx(parent)
	return ctx, cl, adm, func() { cancel(); cl.Close() }, nil
}
