package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// adminUndrain takes broker id out of draining: its current registration is accepting
// again (placement, failover takers, moves and the balancer may give it partitions).
// The moves the drain began finish; the balancer evens the load afterwards.
func adminUndrain(ctx context.Context, cl *ctlclient.Client, w io.Writer, id int32) error {
	b, ok := cl.View().Broker(id)
	switch {
	case id < 0:
		return errors.New("undrain needs --broker, the ID of a draining broker")
	case !ok:
		return fmt.Errorf("broker %d is not registered (%w)", id, metadata.ErrUnknownBroker)
	case !b.Active():
		return fmt.Errorf("broker %d is %s: only a live broker can be undrained; a restarted broker registers active", id, b.State)
	case !b.Draining():
		fmt.Fprintf(w, "broker %d (epoch %d) is not draining: nothing to do\n", id, b.Epoch)
		return nil
	}
	if err := cl.UndrainRegistration(ctx, id, b.Epoch); err != nil {
		return err
	}
	moving := 0
	for _, t := range cl.View().Topics {
		for _, p := range t.Partitions {
			if p.Moving && p.Leader == id {
				moving++
			}
		}
	}
	fmt.Fprintf(w, "broker %d (epoch %d) accepting partitions again; %d moves its drain began are finishing\n", id, b.Epoch, moving)
	return nil
}

// adminDecommission retires broker id, which must be fenced (stopped, its lease run
// out) and lead nothing: it leaves every listing, and its ID may be reused later.
func adminDecommission(ctx context.Context, cl *ctlclient.Client, w io.Writer, id int32) error {
	if id < 0 {
		return errors.New("decommission needs --broker, the ID of a stopped (fenced) broker")
	}
	b, ok := cl.View().Broker(id)
	if ok && b.Decommissioned() {
		fmt.Fprintf(w, "broker %d is decommissioned already\n", id)
		return nil
	}
	if err := cl.Decommission(ctx, id); err != nil {
		switch {
		case errors.Is(err, metadata.ErrUnknownBroker):
			return fmt.Errorf("broker %d was never registered: %w", id, err)
		case errors.Is(err, metadata.ErrBrokerState) && ok && b.Active():
			return fmt.Errorf("broker %d is %s, not stopped: drain it (weir admin drain --broker %d), stop its process, wait until `weir admin describe` shows it fenced (its lease runs out in seconds), then decommission it: %w", id, ctlwire.StateOf(b), id, err)
		}
		return err
	}
	fmt.Fprintf(w, "broker %d (last epoch %d) decommissioned: it is no longer listed; its WAL directories are deleted once object storage holds their data\n", id, b.Epoch)
	return nil
}
