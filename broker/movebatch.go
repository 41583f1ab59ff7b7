package broker

import (
	"context"
	"sync"
	"time"

	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/metadata"
)

// moveBatcher gathers the hand-offs this broker finishes at about the same time into
// one CompleteMovesGen (one controller request, one Raft entry): with one entry each,
// the last of 100 moves requested at once waited for the 99 before it, its writes
// refused all the while.
type moveBatcher struct {
	once    sync.Once
	mu      sync.Mutex
	pending []moveReq
	kick    chan struct{}
}

type moveReq struct {
	d     metadata.MoveDone
	reply chan error
}

// moveGather is how long the batcher waits after the first hand-off for others to join.
const moveGather = 2 * time.Millisecond

// completeMove reports the end of p's part for the move gen to the controller: batched
// with other hand-offs when the store can (metadata.BatchMover).
func (b *Broker) completeMove(ctx context.Context, p *partlog.Partition, end int64, gen uint64) error {
	bm, ok := b.meta.(metadata.BatchMover)
	if !ok {
		m, ok := b.meta.(metadata.MoveCompleter)
		if !ok {
			return context.Canceled
		}
		return m.CompleteMoveGen(ctx, p.ID(), p.Index(), end, gen)
	}
	mb := &b.moveBatch
	mb.once.Do(func() {
		mb.kick = make(chan struct{}, 1)
		b.wg.Add(1)
		go b.runMoveBatcher(bm)
	})
	r := moveReq{d: metadata.MoveDone{Topic: p.ID(), Partition: p.Index(), EndOffset: end, MoveGen: gen}, reply: make(chan error, 1)}
	mb.mu.Lock()
	mb.pending = append(mb.pending, r)
	mb.mu.Unlock()
	select {
	case mb.kick <- struct{}{}:
	default:
	}
	select {
	case err := <-r.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *Broker) runMoveBatcher(bm metadata.BatchMover) {
	defer b.wg.Done()
	mb := &b.moveBatch
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-mb.kick:
		}
		select { // let the hand-offs finishing with this one join it
		case <-time.After(moveGather):
		case <-b.ctx.Done():
			return
		}
		mb.mu.Lock()
		batch := mb.pending
		mb.pending = nil
		mb.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		items := make([]metadata.MoveDone, len(batch))
		for i, r := range batch {
			items[i] = r.d
		}
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		errs, err := bm.CompleteMovesGen(ctx, items)
		cancel()
		for i, r := range batch {
			if err == nil {
				r.reply <- errs[i]
			} else {
				r.reply <- err
			}
		}
	}
}
