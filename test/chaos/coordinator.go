package chaos

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/controller/ctlclient"
)

// The group coordinator faults hit the broker coordinating the load's consumer group:
// the leader of the group's __consumer_offsets partition, FNV-32a(group) mod the topic's
// partition count (broker/offsets_topic.go, coordinatorPartition), as FindCoordinator
// answers it.
//
// coordinator-move moves that partition gracefully to another broker (ARG, default one
// at random), as `weir admin move` does, and waits for the move to complete. The
// controllers' balancer, when on, may move it back within seconds (a second move in
// the fault's window): run the cluster with --balance=false to see one move alone.
// coordinator-kill SIGKILLs the coordinator and starts it again after RestartAfter (the
// kill fault, with the broker chosen as the coordinator).

// offsetsTopic is Kafka's name, which Weir keeps (metadata.OffsetsTopic; written out
// here: the tool sees the cluster as a client does).
const offsetsTopic = "__consumer_offsets"

// coordinatorPartition is the __consumer_offsets partition of group among n.
func coordinatorPartition(group string, n int) int32 {
	h := fnv.New32a()
	h.Write([]byte(group))
	return int32(h.Sum32() % uint32(n))
}

// findCoordinator asks the cluster (FindCoordinator of key, keyType 0 a group, 1 a
// transactional id) which broker coordinates key, retrying for a while (a coordinator
// just moved or failed over answers COORDINATOR_NOT_AVAILABLE until it has loaded its
// state).
func findCoordinator(ctx context.Context, boot []string, key string, keyType int8) (int32, error) {
	cl, err := kgo.NewClient(clientOpts(boot)...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorKeys = key, []string{key} // v0-3, v4+
		req.CoordinatorType = keyType
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			node, code := resp.NodeID, resp.ErrorCode
			for _, c := range resp.Coordinators {
				if c.Key == key {
					node, code = c.NodeID, c.ErrorCode
				}
			}
			if err = kerr.ErrorForCode(code); err == nil && node >= 0 {
				return node, nil
			} else if err == nil {
				err = errors.New("no coordinator in the answer")
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("chaos: FindCoordinator %s: %w", key, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// controllerClient opens a client of the target's controllers.
func controllerClient(cfg Config, t target) (*ctlclient.Client, error) {
	apis := t.ControllerAPIs()
	if len(apis) == 0 {
		return nil, errors.New("chaos: coordinator-move needs the controllers (--controllers when attached)")
	}
	ccfg := cfg.ControllerClient
	ccfg.Controllers = apis
	ccfg.BrokerID = -1
	ccfg.Logger = slog.New(slog.DiscardHandler)
	return ctlclient.NewClient(ccfg)
}

// coordinatorNote says which broker FindCoordinator named for the group and, when the
// controllers are at hand, which leads the group's __consumer_offsets partition (they
// differ while a move or failover is under way, or if a broker answers from a stale
// view).
func coordinatorNote(cfg Config, t target, found int32) string {
	note := fmt.Sprintf("FindCoordinator named broker %d for group %s", found, cfg.group())
	if len(t.ControllerAPIs()) == 0 {
		return note
	}
	cl, err := controllerClient(cfg, t)
	if err != nil {
		return note
	}
	defer cl.Close()
	if ot := cl.View().Topics[offsetsTopic]; ot != nil && len(ot.Partitions) > 0 {
		idx := coordinatorPartition(cfg.group(), len(ot.Partitions))
		note += fmt.Sprintf("; the controllers: %s/%d led by %d", offsetsTopic, idx, ot.Partitions[idx].Leader)
	}
	return note
}

// runCoordinatorMove moves the group's __consumer_offsets partition to f.Broker (0:
// another live broker at random) and waits until the target leads it.
func runCoordinatorMove(ctx context.Context, cfg Config, t target, f Fault, r *rand.Rand, ev *Event, log *slog.Logger) error {
	group := cfg.group()
	cl, err := controllerClient(cfg, t)
	if err != nil {
		return err
	}
	defer cl.Close()
	found, err := findCoordinator(ctx, t.Bootstrap(), group, 0)
	if err != nil {
		return err
	}
	v := cl.View()
	ot := v.Topics[offsetsTopic]
	if ot == nil || len(ot.Partitions) == 0 {
		return fmt.Errorf("chaos: no %s topic (has the group %s committed?)", offsetsTopic, group)
	}
	idx := coordinatorPartition(group, len(ot.Partitions))
	from := ot.Partitions[idx].Leader
	if from != found {
		// The controllers' view is what a move acts on; say when clients were told
		// otherwise (a move or failover under way).
		log.Warn("coordinator: FindCoordinator and the controllers disagree", "group", group, "find_coordinator", found, "leader", from, "partition", idx)
	}
	to := f.Broker
	if to == 0 {
		var live []int32
		for _, id := range t.Brokers() {
			if b, ok := v.Broker(id); ok && b.Active() && id != from {
				live = append(live, id)
			}
		}
		if len(live) == 0 {
			return fmt.Errorf("chaos: no live broker but %d to move the coordinator to", from)
		}
		slices.Sort(live)
		to = live[r.IntN(len(live))]
	}
	if to == from {
		return fmt.Errorf("chaos: broker %d coordinates %s already (%s/%d)", to, group, offsetsTopic, idx)
	}
	ev.Brokers = []int32{from, to}
	log.Info("coordinator move", "group", group, "partition", idx, "from", from, "to", to)
	start := time.Now()
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := cl.MovePartition(mctx, ot.ID, idx, to); err != nil {
		return fmt.Errorf("chaos: moving %s/%d to %d: %w", offsetsTopic, idx, to, err)
	}
	for {
		p := cl.View().Topics[offsetsTopic].Partitions[idx]
		if p.Leader == to && !p.Moving {
			ev.Note = fmt.Sprintf("group %s: %s/%d moved from broker %d to %d in %v", group, offsetsTopic, idx, from, to, time.Since(start).Round(time.Millisecond))
			return nil
		}
		select {
		case <-cl.Changed():
		case <-mctx.Done():
			return fmt.Errorf("chaos: %s/%d not led by %d %v after the move began (leader %d, moving %v)", offsetsTopic, idx, to, time.Since(start).Round(time.Millisecond), p.Leader, p.Moving)
		}
	}
}
