package bench

import (
	"context"
	"fmt"
	"io"
	"time"
)

// runE2E produces and consumes at once. Consumers start at the current end
// of the topic before the first record is sent; producers stamp each value
// with its (scheduled) send time, and consumers record receipt - send time.
// Both sides count only records sent after warmup, so produce's
// records_acked and consume's records_read describe the same records.
func runE2E(ctx context.Context, cfg *config, stdout, stderr io.Writer) error {
	out := progressWriter(cfg, stdout, stderr)
	res := &Result{Mode: "e2e", Settings: cfg.settings, StartedAt: time.Now()}
	adm, err := newAdmin(cfg)
	if err != nil {
		return err
	}
	defer adm.close()
	parts, err := adm.ensureTopic(ctx, cfg, out)
	if err != nil {
		return err
	}
	startOffs, err := adm.offsets(ctx, cfg.topic, true)
	if err != nil {
		return err
	}
	if cfg.group != "" {
		// Without committed offsets, a partition that moves to another
		// member in a rebalance restarts at the then-current end and
		// records in between are never read.
		if err := adm.commit(ctx, cfg.group, cfg.topic, startOffs); err != nil {
			fmt.Fprintf(out, "warning: could not commit start offsets for group %s (%v); records may be missed in rebalances\n", cfg.group, err)
		}
	}
	cr, err := newConsumerRun(cfg, parts, startOffs, true, true, out)
	if err != nil {
		return err
	}
	defer cr.close()
	pr, err := newProducerRun(cfg)
	if err != nil {
		return err
	}
	defer pr.close()

	if cfg.group != "" {
		// franz-go joins the group from NewClient on, no polling needed.
		waitAssigned(ctx, cr, len(parts), out)
	}
	fmt.Fprintf(out, "consuming with %d consumer(s), group %q, from the end of %s\n", len(cr.clients), cfg.group, cfg.topic)
	printProduceHeader(out, cfg)
	pr.start()
	// Both sides measure from the producer's end of warmup: what counts
	// on the consumer is the send time stamped in each record.
	cr.start(ctx, pr.begin)

	pst := &stream{name: "produce", rec: pr.rec}
	cst := &stream{name: "e2e", rec: cr.rec}
	stop := make(chan struct{})
	done := runProgress(stop, cfg.interval, pr.begin, out, pst, cst)
	pr.run(ctx, out)

	// Sending is over: read up to the end offsets as they are now.
	if ctx.Err() == nil {
		if target, err := adm.offsets(ctx, cfg.topic, true); err != nil {
			fmt.Fprintf(out, "warning: %v; consumers stop after --drain-timeout without progress\n", err)
		} else {
			cr.track.setTarget(target)
		}
		cr.track.touch()
		cr.wait(ctx, time.Time{}, cfg.drainTimeout)
	}
	cr.stopPolling()
	close(stop)
	<-done
	res.Produce = pr.result(pst.series)
	res.Consume = cr.result(cst.series, false, time.Time{})
	return finish(cfg, res, stdout, out)
}
