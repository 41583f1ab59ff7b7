package partlog

import "sort"

// Storage is where a partition's data lives, as its leader's index sees it: what
// `weir partition describe` and DescribeLogDirs report.
type Storage struct {
	// WAL is, per WAL directory (broker and registration epoch), the bytes of synced
	// batches not in object storage yet (those a failover or move would read there).
	WAL map[SourceID]int64
	// Uploaded is the first offset object storage does not hold (-1: it holds none).
	Uploaded int64
}

// Storage reports where the partition's data lives now.
func (p *Partition) Storage() Storage {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Storage{WAL: map[SourceID]int64{}, Uploaded: p.tier.uploaded}
	i := sort.Search(len(p.batches), func(i int) bool { return p.batches[i].last >= p.tier.uploaded })
	for _, b := range p.batches[i:] {
		if b.synced {
			st.WAL[b.from] += int64(b.size)
		}
	}
	return st
}

// ProducerInfo is one idempotent producer's state in a partition (DescribeProducers).
type ProducerInfo struct {
	ID           int64
	Epoch        int16
	LastSequence int32
	// LastOffset is the offset of the producer's last batch (its base offset).
	LastOffset int64
}

// Producers lists the producers with state in the partition, by ID.
func (p *Partition) Producers() []ProducerInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ProducerInfo, 0, len(p.producers))
	for id, s := range p.producers {
		if len(s.entries) == 0 {
			continue
		}
		last := s.entries[len(s.entries)-1]
		out = append(out, ProducerInfo{ID: id, Epoch: s.epoch, LastSequence: last.last, LastOffset: last.offset})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
