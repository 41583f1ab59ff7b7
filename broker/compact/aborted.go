package compact

import "github.com/weir-io/weir/metadata"

// Aborted answers whether a transactional batch belongs to an aborted transaction: its
// producer had a transaction from First to the abort marker at Last around the offset.
type Aborted struct {
	byPID map[int64][]metadata.AbortedTxn
}

// NewAborted indexes aborted transactions (a partition's, for the offsets cleaned).
func NewAborted(txns []metadata.AbortedTxn) *Aborted {
	a := &Aborted{byPID: map[int64][]metadata.AbortedTxn{}}
	for _, t := range txns {
		a.byPID[t.ProducerID] = append(a.byPID[t.ProducerID], t)
	}
	return a
}

// Has reports whether producer pid's batch at offset lies in an aborted transaction.
func (a *Aborted) Has(pid, offset int64) bool {
	if a == nil {
		return false
	}
	for _, t := range a.byPID[pid] {
		if t.First <= offset && offset < t.Last {
			return true
		}
	}
	return false
}
