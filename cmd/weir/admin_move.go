package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/weir-io/weir/controller/ctlclient"
)

func runAdminMove(ctx context.Context, args []string, out io.Writer) error {
	fs := adminFlags("move", "--topic T --partition N --to BROKER [flags]", "Moves partition N of topic T to broker BROKER: the current leader hands it off gracefully (its WAL is\n"+
		"read to the end by the new leader; no data is copied). Waits until the new leader serves it.", out)
	var cc ctlConn
	cc.bind(fs)
	topic := fs.String("topic", "", "the topic")
	partition := fs.Int("partition", -1, "the partition")
	to := fs.Int("to", -1, "the ID of the broker that will lead the partition")
	ctx, cl, done, err := cc.start(ctx, fs, args)
	if cl == nil {
		return err
	}
	defer done()
	if *topic == "" || *to < 0 {
		return fmt.Errorf("move needs --topic, --partition and --to BROKER")
	}
	t := cl.View().Topics[*topic]
	switch {
	case t == nil:
		return fmt.Errorf("topic %q does not exist", *topic)
	case *partition < 0 || *partition >= len(t.Partitions):
		return fmt.Errorf("topic %q has no partition %d (it has %d: 0 to %d)", *topic, *partition, len(t.Partitions), len(t.Partitions)-1)
	case t.Partitions[*partition].Leader == int32(*to) && !t.Partitions[*partition].Moving:
		// Nothing to do is not a failure: scripts that move partitions where they belong
		// run again safely.
		fmt.Fprintf(out, "%s/%d is already led by broker %d: nothing to move\n", *topic, *partition, *to)
		return nil
	}
	start := time.Now()
	if err := cl.MovePartition(ctx, t.ID, int32(*partition), int32(*to)); err != nil {
		return err
	}
	for {
		p := cl.View().Topics[*topic].Partitions[*partition]
		if p.Leader == int32(*to) && !p.Moving {
			fmt.Fprintf(out, "%s/%d now led by broker %d (leader epoch %d) after %v\n", *topic, *partition, p.Leader, p.LeaderEpoch, time.Since(start).Round(time.Millisecond))
			return nil
		}
		select {
		case <-cl.Changed():
		case <-ctx.Done():
			return fmt.Errorf("move did not complete within %v (is the current leader up?)", cc.timeout)
		}
	}
}

// brokerCommand makes the run function of an admin command on one broker: its flags
// are the shared ones and --broker; fn runs with a connected client and the ID (-1 when
// --broker is missing: fn says what it needs).
func brokerCommand(name, help string, fn func(ctx context.Context, cl *ctlclient.Client, w io.Writer, id int32) error) func(context.Context, []string, io.Writer) error {
	return func(ctx context.Context, args []string, out io.Writer) error {
		fs := adminFlags(name, "--broker ID [flags]", help, out)
		var cc ctlConn
		cc.bind(fs)
		id := fs.Int("broker", -1, "the broker's ID")
		ctx, cl, done, err := cc.start(ctx, fs, args)
		if cl == nil {
			return err
		}
		defer done()
		return fn(ctx, cl, out, int32(*id))
	}
}

const drainHelp = "Drains broker ID before it is stopped: every partition it leads moves gracefully to another broker, and it\n" +
	"is given nothing new. It stays draining until it registers again (a restart) or is undrained. Waits until it\n" +
	"leads nothing (--timeout)."

// adminDrain drains broker id and waits until it leads nothing.
func adminDrain(ctx context.Context, cl *ctlclient.Client, out io.Writer, id int32) error {
	b, ok := cl.View().Broker(id)
	if !ok || !b.Active() {
		return fmt.Errorf("drain needs --broker, the ID of a live broker")
	}
	res, err := cl.DrainRegistration(ctx, b.ID, b.Epoch)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "broker %d (epoch %d) draining: %d moves begun, %d moving already, %d recovering (moved once recovered), %d without a target\n",
		b.ID, b.Epoch, res.Moves, res.AlreadyMoving, res.Recovering, res.NoTarget)
	start := time.Now()
	for {
		n := cl.View().PartitionsLedBy(b.ID)
		if n == 0 {
			fmt.Fprintf(out, "broker %d leads nothing after %v\n", b.ID, time.Since(start).Round(time.Millisecond))
			return nil
		}
		select {
		case <-cl.Changed():
		case <-ctx.Done():
			return fmt.Errorf("broker %d still leads %d partitions after %v (are the brokers up? is the balancer on?)", b.ID, n, time.Since(start).Round(time.Second))
		}
	}
}
