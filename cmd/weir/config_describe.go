package main

import (
	"context"
	"fmt"
	"io"
)

const configDescribeHelp = `Usage: weir config describe --topic T | --broker ID [--all] [flags]

Prints a topic's or a broker's configs (DescribeConfigs): by default those not at their
default (a topic's DYNAMIC_TOPIC_CONFIG, a broker's STATIC_BROKER_CONFIG), with --all
every config with its source. Weir's broker configs are its flags, all read-only.
`

func runConfigDescribe(ctx context.Context, args []string, w io.Writer) error {
	const cmd = "config describe"
	c := newKafkaCmd("weir config describe", configDescribeHelp, w)
	var res configResource
	res.bind(c)
	all := c.fs.Bool("all", false, "every config with its source (default: only the configs not at their default)")
	rest, help, err := c.parse(args)
	if help || err != nil {
		return err
	}
	typ, name, err := res.resolve(cmd)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("%s: unexpected %q (the resource is --topic T or --broker ID)", cmd, rest)
	}
	ctx, cl, _, done, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	rc := describeConfigs(ctx, cl, typ, []string{name}, *all)[0]
	err = c.emit(w, rc, func(tw io.Writer) {
		if rc.failed() {
			fmt.Fprintf(tw, "%s %s: %s\n", rc.Type, rc.Name, rc.text())
			return
		}
		if len(rc.Configs) == 0 {
			fmt.Fprintf(tw, "%s %s has no configs set (--all shows every config)\n", rc.Type, rc.Name)
			return
		}
		fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE\tREAD-ONLY")
		for _, e := range rc.Configs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%v\n", e.Name, e.value(), e.Source, e.ReadOnly)
		}
	})
	if err != nil {
		return err
	}
	var fail failures
	fail.add(rc.Type+" "+rc.Name, rc.itemErr)
	return fail.err(cmd, "")
}
