package partlog

import "github.com/weir-io/weir/metadata"

// A partition's data may span several brokers' WALs (its log chain,
// metadata.Partition.Logs): after a leadership move the new leader reads the older
// offsets from the previous leaders' WALs on the shared file system and appends new ones
// to its own. Nothing is copied.

// LogRange is one range of a partition's log chain: Broker's WAL holds offsets
// [Start, End); End -1 means open-ended (the current leader's range).
type LogRange struct {
	Broker     int32
	Start, End int64
}

// ChainOf returns the log chain of a partition; metadata without one (the single-node
// store) means the leader has written everything.
func ChainOf(mp metadata.Partition) []LogRange {
	if len(mp.Logs) == 0 {
		return []LogRange{{Broker: mp.Leader, Start: 0, End: -1}}
	}
	out := make([]LogRange, len(mp.Logs))
	for i, l := range mp.Logs {
		out[i] = LogRange{Broker: l.Broker, Start: l.StartOffset, End: -1}
		if i > 0 {
			out[i-1].End = l.StartOffset
		}
	}
	return out
}

// Holds reports whether offset falls in the range.
func (r LogRange) Holds(offset int64) bool {
	return offset >= r.Start && (r.End < 0 || offset < r.End)
}
