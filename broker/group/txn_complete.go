package group

// txn_complete.go ends transactions in groups: CompleteTxn, which the broker calls when
// the transaction coordinator writes a transaction's marker to a __consumer_offsets
// partition, and the index of the groups where each producer may have pending offsets.
//
// The end is made durable as a record of each group (Record.TxnEnds) written through the
// group's queue like every other change, not left to the marker in the partition's log:
// the loader needs nothing but group records, the order of a group's changes is its
// queue's, and a Full record (compaction) is computed after every earlier end is applied,
// so raising the log start past the end loses nothing. A marker the broker appends to
// the partition as well is skipped by the loader (broker/groupload.go).

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
)

// CompleteTxn ends producerID's transaction in the groups belongs selects (those of the
// __consumer_offsets partition the marker is for): with commit, the producer's pending
// offsets become committed (unless a later record superseded them, txn_offsets.go);
// otherwise they are dropped. It returns once a TxnEnd record of every such group is
// durable, so that a reload neither loses the commit nor brings aborted offsets back.
// Ending a transaction again is a no-op, so the caller retries until CompleteTxn returns
// nil. An error wraps ErrNotOwned or ErrLoading (a group of the partition is not served
// here now, or is being loaded), a store error, or the context's.
//
// The caller must serve the partition (its groups Owned) when it calls: CompleteTxn
// finds the groups through what this coordinator holds. A load or unload of the
// partition during the call makes it fail, never succeed without them.
func (c *Coordinator) CompleteTxn(ctx context.Context, belongs func(group string) bool, producerID int64, commit bool) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fail := func(name string, err error) {
		mu.Lock()
		errs = append(errs, fmt.Errorf("group %q: %w", name, err))
		mu.Unlock()
	}
	end := TxnEnd{ProducerID: producerID, Commit: commit}
	for _, name := range c.txnGroupNames(producerID, belongs) {
		g := c.lockedGroup(name, false)
		if g == nil {
			// Unloaded (its pending offsets are in the log: the next load has them), or
			// deleted with them.
			switch c.status(name) {
			case NotOwned:
				c.untrackTxn(producerID, name)
				fail(name, ErrNotOwned)
			case Loading:
				fail(name, ErrLoading)
			default:
				c.untrackTxn(producerID, name)
			}
			continue
		}
		wg.Add(1)
		g.enqueueWrite(&write{ctx: ctx, ends: []TxnEnd{end}, apply: func(err error) {
			defer wg.Done()
			if err != nil {
				fail(name, err)
				return
			}
			g.txn.end(end, g.putOffset)
			if !g.txn.has(producerID) && g.txnQueued[producerID] == 0 {
				c.untrackTxn(producerID, name)
			}
			// An Empty group left with nothing (an aborted transaction of a simple
			// consumer) goes, as after OffsetDelete.
			g.afterBatch = append(g.afterBatch, func() {
				if g.idle() && len(g.writeQ) == 0 && !g.removed {
					g.removeFromCoordinator()
				}
			})
		}})
		g.unlock()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// trackTxn notes that group may hold pending offsets of producerID. Called with the
// group locked (lock order group -> coordinator).
func (c *Coordinator) trackTxn(producerID int64, group string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.txnGroups == nil {
		c.txnGroups = map[int64]map[string]struct{}{}
	}
	gs := c.txnGroups[producerID]
	if gs == nil {
		gs = map[string]struct{}{}
		c.txnGroups[producerID] = gs
	}
	gs[group] = struct{}{}
}

func (c *Coordinator) untrackTxn(producerID int64, group string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	gs := c.txnGroups[producerID]
	delete(gs, group)
	if len(gs) == 0 {
		delete(c.txnGroups, producerID)
	}
}

// txnGroupNames lists, sorted, the groups belongs selects where producerID may have
// pending offsets.
func (c *Coordinator) txnGroupNames(producerID int64, belongs func(string) bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for name := range c.txnGroups[producerID] {
		if belongs(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// reindexTxn replaces the index entries of the groups belongs selects by what a load
// found. Entries of unloaded groups are kept until then, so that a CompleteTxn during an
// unload finds them missing and fails instead of ending nothing.
func (c *Coordinator) reindexTxn(belongs func(string) bool, states map[string]*loadState) {
	c.mu.Lock()
	for pid, gs := range c.txnGroups {
		for name := range gs {
			if belongs(name) {
				delete(gs, name)
			}
		}
		if len(gs) == 0 {
			delete(c.txnGroups, pid)
		}
	}
	c.mu.Unlock()
	for name, s := range states {
		for _, pid := range s.txn.producers() {
			c.trackTxn(pid, name)
		}
	}
}
