package broker

// txnload.go keeps the transaction coordinator (broker/txn) in step with the
// __transaction_state partitions this broker leads, as groupload.go does for groups
// (simpler: the records are small and the state of an id is its latest record, so no
// compaction runs here yet): a partition that becomes Ready here is loaded (its records
// replayed, txn.Coordinator.Load, with the partition's leader epoch as the coordinator
// epoch) before its ids are served; one that stops being Ready here is unloaded at once.
// A store write for a partition not loaded (or loaded in another tenure) is refused, so
// a record never follows a load's snapshot of the log unseen.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/broker/txn"
	"github.com/weir-io/weir/internal/recbatch"
)

// txnLoads is the load state of the __transaction_state partitions here.
type txnLoads struct {
	mu     sync.Mutex
	served map[int32]*partlog.Partition // loaded partition objects, by index
	kick   chan struct{}
}

// errTxnRead: a transaction record batch could not be read.
var errTxnRead = errors.New("broker: reading transaction records failed")

// errTxnNotLoaded refuses a record for a partition not loaded here: the coordinator
// no longer (or not yet) owns it.
var errTxnNotLoaded = fmt.Errorf("broker: __transaction_state partition not loaded here: %w", txn.ErrNotCoordinator)

// wakeTxnLoads asks the loader to look at the partitions again (a view was applied, or
// a partition became Ready: coordinatorsServe).
func (b *Broker) wakeTxnLoads() {
	if b.txns == nil {
		return
	}
	select {
	case b.txnLoads.kick <- struct{}{}:
	default:
	}
}

// txnLoadLoop loads and unloads __transaction_state partitions until the broker closes.
func (b *Broker) txnLoadLoop() {
	defer b.wg.Done()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	failures := 0
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-b.txnLoads.kick:
		case <-retry.C:
		}
		if err := b.syncTxnLoads(); err != nil {
			failures++
			delay := min(50*time.Millisecond<<min(failures-1, 6), 2*time.Second)
			b.log.Warn("loading transactions failed; their ids answer COORDINATOR_LOAD_IN_PROGRESS until a retry succeeds", "attempt", failures, "retry_in", delay, "err", err)
			retry.Reset(delay)
			continue
		}
		failures = 0
	}
}

// syncTxnLoads unloads what stopped being Ready here and loads what became Ready.
func (b *Broker) syncTxnLoads() error {
	t := b.meta.View().Topics[txnStateTopic]
	ls := &b.txnLoads
	ls.mu.Lock()
	served := make(map[int32]*partlog.Partition, len(ls.served))
	for i, p := range ls.served {
		served[i] = p
	}
	ls.mu.Unlock()
	for idx, p := range served {
		if t == nil || b.parts.Get(t.ID, idx) != p || p.State() != partlog.Ready {
			ls.mu.Lock()
			delete(ls.served, idx)
			ls.mu.Unlock()
			n := b.txns.Unload(idx)
			b.log.Info("transactions unloaded: their partition is no longer served here", "partition", idx, "ids", n)
		}
	}
	if t == nil {
		return nil
	}
	var errs []error
	for i := range t.Partitions {
		idx := int32(i)
		p := b.parts.Get(t.ID, idx)
		if p == nil || p.State() != partlog.Ready || served[idx] == p {
			continue
		}
		start := time.Now()
		st, err := b.txns.Load(idx, p.LeaderEpoch(), func(apply func(txn.Record)) error {
			_, err := b.replayPartition(p, txnStateTopic, errTxnRead, func(off int64, data []byte) {
				err := recbatch.DecodeRecords(data, func(key, value []byte) {
					rec, err := txn.DecodeRecord(key, value)
					if err != nil {
						b.log.Error("loading transactions: undecodable record skipped", "partition", idx, "offset", off, "err", err)
						return
					}
					apply(rec)
				})
				if err != nil {
					b.log.Error("loading transactions: undecodable batch skipped", "partition", idx, "offset", off, "err", err)
				}
			})
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("partition %d: %w", idx, err))
			continue
		}
		if b.parts.Get(p.ID(), idx) == p && p.State() == partlog.Ready {
			ls.mu.Lock()
			ls.served[idx] = p
			ls.mu.Unlock()
		} else {
			b.txns.Unload(idx)
		}
		b.log.Info("transactions loaded", "partition", idx, "records", st.Records, "ids", st.IDs, "resumed", st.Resumed, "took", time.Since(start))
	}
	return errors.Join(errs...)
}

// txnStore makes transaction records durable in their __transaction_state partition
// (txn.Store).
type txnStore struct{ b *Broker }

func (s txnStore) Write(ctx context.Context, idx, coordinatorEpoch int32, rec txn.Record) error {
	b := s.b
	t := b.meta.View().Topics[txnStateTopic]
	if t == nil {
		return errTxnNotLoaded
	}
	p, err := b.lookup(t, idx, true)
	if err != nil {
		return fmt.Errorf("%w: %w", errTxnNotLoaded, err)
	}
	b.txnLoads.mu.Lock()
	loaded := b.txnLoads.served[idx] == p
	b.txnLoads.mu.Unlock()
	if !loaded || p.LeaderEpoch() != coordinatorEpoch {
		return errTxnNotLoaded
	}
	key, value := txn.EncodeRecord(rec)
	_, err = b.appendRecord(ctx, p, key, value)
	return err
}
