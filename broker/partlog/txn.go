package partlog

import (
	"fmt"
	"slices"
	"sort"

	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
)

// Transactions (KIP-98) as one partition sees them. A transactional data batch of a
// producer with no open transaction here opens one at its base offset; the producer's
// later transactional batches belong to it; a marker (a control batch the leader
// appends when the coordinator ends the transaction: recbatch.EncodeMarker) ends it.
//
//   - txns: each producer's open transaction, by its first offset.
//   - The last stable offset (LSO) is the smallest of those first offsets, or the high
//     watermark: read_committed consumers read nothing at or above it. A marker that is
//     prepared but not synced has not ended its transaction for them yet.
//   - aborted: for each abort marker that ended a transaction, {producer, first offset,
//     marker offset}, ascending by marker offset, from the log start on. It is rebuilt by
//     a load from the WAL batches and from the manifest: each committed object range
//     carries the aborted transactions whose markers it holds (metadata.ObjectRange), and
//     each producer snapshot the transactions open as of its offset
//     (metadata.ProducerState.TxnFirst), so data that left the WALs still filters.
//
// Every batch with a transactional effect remembers the producer's open transaction
// before it (batchLoc.txnPrev): Rollback undoes the effects of unsynced batches with it,
// and ProducerSnapshot walks back from the current state to an earlier offset.

// txnKind is a batch's part in transactions.
type txnKind uint8

const (
	txnNone   txnKind = iota // not transactional (or a control batch that is no marker)
	txnData                  // a transactional data batch
	txnCommit                // a commit marker
	txnAbort                 // an abort marker
)

func (k txnKind) marker() bool { return k == txnCommit || k == txnAbort }

// txnKindOf classifies a batch (its bytes are read only for a control batch).
func txnKindOf(h *recbatch.Header, batch []byte) txnKind {
	switch {
	case h.Control():
		m, err := recbatch.ParseMarker(batch)
		switch {
		case err != nil:
			return txnNone
		case m.Commit:
			return txnCommit
		default:
			return txnAbort
		}
	case h.Transactional():
		return txnData
	}
	return txnNone
}

// openTxnLocked is the first offset of producer pid's open transaction, or -1.
func (p *Partition) openTxnLocked(pid int64) int64 {
	if first, ok := p.txns[pid]; ok {
		return first
	}
	return -1
}

// setTxnLocked records pid's open transaction (first < 0: none).
func (p *Partition) setTxnLocked(pid, first int64) {
	if first < 0 {
		delete(p.txns, pid)
		return
	}
	if p.txns == nil {
		p.txns = map[int64]int64{}
	}
	p.txns[pid] = first
}

// checkTxnLocked refuses an idempotent, non-transactional batch of a producer whose
// transaction is open here (Kafka: INVALID_TXN_STATE).
func (p *Partition) checkTxnLocked(h *recbatch.Header) error {
	if !h.Transactional() && p.openTxnLocked(h.ProducerID) >= 0 {
		return fmt.Errorf("%w: producer %d wrote a non-transactional batch in its open transaction", ErrInvalidTxnState, h.ProducerID)
	}
	return nil
}

// beginTxnLocked applies a transactional data batch: it opens its producer's
// transaction unless one is open.
func (p *Partition) beginTxnLocked(loc *batchLoc) {
	loc.txnPrev = p.openTxnLocked(loc.pid)
	if loc.txnPrev < 0 {
		p.setTxnLocked(loc.pid, loc.base)
	}
}

// endTxnLocked applies a marker: it ends its producer's open transaction (an abort
// records it as aborted) and, like Kafka, takes a newer producer epoch from it (the
// coordinator fences a producer with a marker of the bumped epoch), which starts the
// producer's sequences afresh. A marker of a producer with no open transaction here
// changes nothing else.
func (p *Partition) endTxnLocked(loc *batchLoc) {
	switch ps := p.producers[loc.pid]; {
	case ps == nil:
		p.setProducer(loc.pid, &producerState{epoch: loc.pepoch})
	case loc.pepoch > ps.epoch:
		ps.epoch, ps.entries = loc.pepoch, ps.entries[:0]
	}
	loc.txnPrev = p.openTxnLocked(loc.pid)
	p.setTxnLocked(loc.pid, -1)
	if loc.txnPrev >= 0 && loc.kind == txnAbort {
		p.putAbortedLocked(metadata.AbortedTxn{ProducerID: loc.pid, First: loc.txnPrev, Last: loc.base})
	}
}

// prepareMarkerLocked is Prepare of a marker batch: refused (ErrProducerFenced) when its
// epoch is older than the producer's.
func (p *Partition) prepareMarkerLocked(h *recbatch.Header, batch []byte, logAppendTimeMs int64) (Prepared, error) {
	m, err := recbatch.ParseMarker(batch)
	if err != nil {
		return Prepared{}, fmt.Errorf("%w: %w", ErrInvalidMarker, err)
	}
	if ps := p.producers[m.ProducerID]; ps != nil && m.ProducerEpoch < ps.epoch {
		return Prepared{}, fmt.Errorf("%w: marker of epoch %d < %d", ErrProducerFenced, m.ProducerEpoch, ps.epoch)
	}
	loc := p.newLocLocked(h, batch, logAppendTimeMs)
	loc.kind, loc.pid, loc.pepoch, loc.pseq = txnCommit, m.ProducerID, m.ProducerEpoch, -1
	if !m.Commit {
		loc.kind = txnAbort
	}
	p.endTxnLocked(loc)
	p.batches = append(p.batches, loc)
	p.next = loc.last + 1
	return Prepared{loc: loc}, nil
}

// undoTxnLocked reverses the transactional effect of an unsynced batch being rolled
// back (Rollback calls it newest first). A marker's epoch change is not reversed here:
// it emptied the producer's window, so the rollback forgets the producer's state
// altogether (producerState.forget) unless older batches remain.
func (p *Partition) undoTxnLocked(b *batchLoc) {
	if b.kind == txnNone || b.pid < 0 {
		return
	}
	if b.kind == txnAbort {
		p.dropAbortedLocked(b.base)
	}
	p.setTxnLocked(b.pid, b.txnPrev)
}

// lsoLocked is the last stable offset: the first offset of the oldest transaction still
// open for readers, else the high watermark. A read replica has the one its leader
// sent, within its own high watermark.
func (p *Partition) lsoLocked() int64 {
	lso := p.hw
	if p.state == Following {
		if p.followLSO >= 0 {
			lso = min(lso, p.followLSO)
		}
		return lso
	}
	for _, first := range p.txns {
		lso = min(lso, first)
	}
	// A marker not synced yet (the tail) has not ended its transaction for readers.
	for i := len(p.batches) - 1; i >= 0 && !p.batches[i].synced; i-- {
		if b := p.batches[i]; b.kind.marker() && b.txnPrev >= 0 {
			lso = min(lso, b.txnPrev)
		}
	}
	return lso
}

// LastStable returns the last stable offset (read_committed consumers read below it).
func (p *Partition) LastStable() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lsoLocked()
}

// OpenTxn returns the first offset of producer pid's open transaction here (ok false:
// none).
func (p *Partition) OpenTxn(pid int64) (first int64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	first = p.openTxnLocked(pid)
	return first, first >= 0
}

// putAbortedLocked adds an aborted transaction to the index, replacing one of the same
// marker (a load may find a marker both in a WAL and in an object range, or learn its
// first offset from a snapshot).
func (p *Partition) putAbortedLocked(a metadata.AbortedTxn) {
	if a.Last < p.logStart {
		return
	}
	i, found := slices.BinarySearchFunc(p.aborted, a.Last, func(x metadata.AbortedTxn, last int64) int { return cmpInt(x.Last, last) })
	if found {
		p.aborted[i] = a
	} else {
		p.aborted = slices.Insert(p.aborted, i, a)
	}
	p.abortSpan = max(p.abortSpan, a.Last-a.First)
}

// dropAbortedLocked forgets the aborted transaction whose marker was at last.
func (p *Partition) dropAbortedLocked(last int64) {
	if i, found := slices.BinarySearchFunc(p.aborted, last, func(x metadata.AbortedTxn, last int64) int { return cmpInt(x.Last, last) }); found {
		p.aborted = slices.Delete(p.aborted, i, i+1)
	}
}

// pruneAbortedLocked drops the aborted transactions whose markers are below the log
// start: none of their data can be read.
func (p *Partition) pruneAbortedLocked() {
	i := sort.Search(len(p.aborted), func(i int) bool { return p.aborted[i].Last >= p.logStart })
	if i > 0 {
		p.aborted = slices.Delete(p.aborted, 0, i)
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Aborted returns the aborted transactions a read_committed read of offsets from..to
// must list (Kafka's FetchResponse.AbortedTransactions): those whose markers lie at or
// above from and whose first offsets are at or below to, by marker offset.
func (p *Partition) Aborted(from, to int64) []metadata.AbortedTxn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.abortedLocked(from, to)
}

func (p *Partition) abortedLocked(from, to int64) []metadata.AbortedTxn {
	var out []metadata.AbortedTxn
	i := sort.Search(len(p.aborted), func(i int) bool { return p.aborted[i].Last >= from })
	// No transaction spans more than abortSpan offsets, so none whose marker lies past
	// to + abortSpan started at or before to.
	for ; i < len(p.aborted) && p.aborted[i].Last-p.abortSpan <= to; i++ {
		if a := p.aborted[i]; a.First <= to {
			out = append(out, a)
		}
	}
	return out
}

// AbortedIn returns the aborted transactions whose markers lie in first..last (the
// range of an object being committed: metadata.PartitionRange.Aborted).
func (p *Partition) AbortedIn(first, last int64) []metadata.AbortedTxn {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := sort.Search(len(p.aborted), func(i int) bool { return p.aborted[i].Last >= first })
	j := sort.Search(len(p.aborted), func(i int) bool { return p.aborted[i].Last > last })
	if i >= j {
		return nil
	}
	return slices.Clone(p.aborted[i:j])
}

// mergeAbortedLocked takes the aborted transactions of the manifest's ranges from the
// first one not merged before on (the manifest only grows at its end; retention and
// the log start drop from its front).
func (p *Partition) mergeAbortedLocked(objs []metadata.ObjectRange) {
	for _, r := range objs {
		if r.LastOffset < p.tier.abortedThrough {
			continue
		}
		for _, a := range r.Aborted {
			p.putAbortedLocked(a)
		}
	}
	if n := len(objs); n > 0 {
		p.tier.abortedThrough = max(p.tier.abortedThrough, objs[n-1].LastOffset+1)
	}
}

// txnsAtLocked returns the transactions open as of offset end (every batch below it
// applied, none from it on), by producer: the current ones with the effects of the
// batches from end on undone, newest first. Those batches are all indexed: nothing at or
// above what object storage holds leaves the index.
func (p *Partition) txnsAtLocked(end int64) map[int64]int64 {
	at := make(map[int64]int64, len(p.txns))
	for pid, first := range p.txns {
		at[pid] = first
	}
	for i := len(p.batches) - 1; i >= 0 && p.batches[i].base >= end; i-- {
		if b := p.batches[i]; b.kind != txnNone && b.pid >= 0 {
			if b.txnPrev < 0 {
				delete(at, b.pid)
			} else {
				at[b.pid] = b.txnPrev
			}
		}
	}
	return at
}

// restoreTxnsLocked puts the transactions the snapshot found open under what a load
// rebuilt from the WAL batches: a transaction open at the snapshot's offset ran on
// until its producer's first marker after it (which then ended it from the snapshot's
// first offset, not from the first batch of it the WALs hold), or is open still.
func (p *Partition) restoreTxnsLocked(snap *metadata.ProducerSnapshot) {
	start := sort.Search(len(p.batches), func(i int) bool { return p.batches[i].base >= snap.Offset })
	for _, sp := range snap.Producers {
		if sp.TxnFirst == nil {
			continue
		}
		first := *sp.TxnFirst
		var end *batchLoc
		for _, b := range p.batches[start:] {
			if b.pid != sp.ID || b.kind == txnNone {
				continue
			}
			// The transaction was open before each of its batches the WALs hold, so a
			// later snapshot walking back (txnsAtLocked) finds it from first.
			b.txnPrev = first
			if b.kind.marker() {
				end = b
				break
			}
		}
		switch {
		case end == nil:
			p.setTxnLocked(sp.ID, first)
		case end.kind == txnAbort:
			p.putAbortedLocked(metadata.AbortedTxn{ProducerID: sp.ID, First: first, Last: end.base})
		}
	}
}
