// Command weir runs Weir's components: a broker, a whole local cluster, and tools.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `weir: a Kafka-compatible broker whose data lives in a shared write-ahead log.

Usage:
  weir dev [flags]        run a local cluster (3 controllers, 3 brokers in zones a, b, c), data under ./data
  weir controller [flags] run one controller of the Raft quorum
  weir broker [flags]     run one broker, in a cluster (--controllers) or standalone
  weir admin <command>    the controllers: cluster status, describe, moves, drain, ACLs, users (weir admin --help)
  weir topic <command>    topics: create, list, describe, delete, add-partitions (weir topic --help)
  weir group <command>    consumer groups: list, describe with lag, reset offsets, delete (weir group --help)
  weir config <command>   topic and broker configs: describe, set, delete (weir config --help)
  weir partition describe where each partition's data lives: offsets, WAL directories, objects, producers
  weir bench <kind> ...   benchmarks: produce, consume, e2e, txn, disk, failover, suite (see weir bench --help)
  weir chaos [flags]      kill, pause and cut brokers under a verified load; report (see weir chaos --help)
  weir version            print the version

Run any command with --help for its flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch os.Args[1] {
	case "broker":
		err = runBroker(ctx, os.Args[2:])
	case "controller":
		err = runController(ctx, os.Args[2:])
	case "dev":
		err = runDev(ctx, os.Args[2:])
	case "admin":
		err = runAdmin(ctx, os.Args[2:], os.Stdout)
	case "topic":
		err = runTopic(ctx, os.Args[2:], os.Stdout)
	case "group":
		err = runGroup(ctx, os.Args[2:], os.Stdout)
	case "config":
		err = runConfig(ctx, os.Args[2:], os.Stdout)
	case "partition":
		err = runPartition(ctx, os.Args[2:], os.Stdout)
	case "bench":
		err = runBench(ctx, os.Args[2:])
	case "chaos":
		err = runChaos(ctx, os.Args[2:])
	case "version", "--version":
		printVersion()
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "weir: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "weir:", err)
		os.Exit(1)
	}
}
