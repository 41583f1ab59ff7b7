package main

import (
	"context"
	"fmt"
	"io"
)

const topicUsage = `Usage: weir topic <command> [flags]

Topics over the Kafka API (CreateTopics, Metadata, ListOffsets, DeleteTopics,
CreatePartitions), as rpk topic and kafka-topics.sh do: any broker answers, with the ACLs
of the principal you connect as.

Commands:
  create NAME...          create topics: --partitions, --replication-factor, --config k=v, --dry-run
  list                    topics with their partition counts (--internal adds __consumer_offsets and the like)
  describe NAME...        per partition: leader, leader epoch, log start offset, high watermark;
                          the topic's non-default configs
  delete NAME...          delete topics and their data
  add-partitions NAME...  add partitions: --num N adds N, --total N grows to N (never shrinks)

Every command takes --bootstrap (default 127.0.0.1:9092, what weir dev runs), --timeout,
--json, and the TLS and SASL flags of a secured cluster (--tls, --tls-ca, --tls-cert,
--tls-key, --sasl-mechanism, --sasl-user, --sasl-password). A refused topic is printed with
the Kafka error name and a hint, and the command exits 1. Run a command with --help for
its flags.
`

// runTopic is weir topic: see topicUsage.
func runTopic(ctx context.Context, args []string, w io.Writer) error {
	sub, rest, ok := subcommand(w, topicUsage, args)
	if !ok {
		return nil
	}
	switch sub {
	case "create":
		return runTopicCreate(ctx, rest, w)
	case "list":
		return runTopicList(ctx, rest, w)
	case "describe":
		return runTopicDescribe(ctx, rest, w)
	case "delete":
		return runTopicDelete(ctx, rest, w)
	case "add-partitions":
		return runTopicAddPartitions(ctx, rest, w)
	}
	return fmt.Errorf("weir topic: unknown command %q (weir topic --help lists them)", sub)
}

// needNames refuses a command given no topic names.
func needNames(cmd string, names []string) error {
	if len(names) == 0 {
		return fmt.Errorf("%s: name one or more topics (weir topic list shows them)", cmd)
	}
	return nil
}
