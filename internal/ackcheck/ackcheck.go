// Package ackcheck checks a Kafka log against what producers were told: every acked
// record must be read back at the offset it was acked at, exactly once, and no offset
// may hold two different records. Tests and load tools feed it the acks and what a
// consumer read from the start of each partition, then ask for the violations.
//
// Values must be unique per record (a producer's ID and sequence number, say): a value
// read at two offsets is a duplicate, which is what an idempotent producer must never
// cause.
package ackcheck

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// TP names a partition.
type TP struct {
	Topic     string
	Partition int32
}

// Checker collects acks and reads; it is safe for concurrent use.
type Checker struct {
	mu    sync.Mutex
	acked map[TP]map[int64]string // offset → value
	read  map[TP]map[int64]string
	fails int
}

// New returns an empty checker.
func New() *Checker {
	return &Checker{acked: map[TP]map[int64]string{}, read: map[TP]map[int64]string{}}
}

// Acked records that value was acked at tp/offset.
func (c *Checker) Acked(tp TP, offset int64, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.acked[tp]
	if m == nil {
		m = map[int64]string{}
		c.acked[tp] = m
	}
	if old, ok := m[offset]; ok && old != value {
		// Two acks for one offset: two writers. Keep both visible in the report.
		m[offset] = old + "|" + value
		return
	}
	m[offset] = value
}

// Failed counts a produce that was not acked (it may or may not be in the log).
func (c *Checker) Failed() {
	c.mu.Lock()
	c.fails++
	c.mu.Unlock()
}

// Read records that a consumer read value at tp/offset (reading an offset twice, as a
// consumer that re-reads after a rebalance does, is fine if the value is the same).
func (c *Checker) Read(tp TP, offset int64, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.read[tp]
	if m == nil {
		m = map[int64]string{}
		c.read[tp] = m
	}
	if old, ok := m[offset]; ok && old != value {
		m[offset] = old + "|" + value
		return
	}
	m[offset] = value
}

// Counts returns the number of acked records and failed produces.
func (c *Checker) Counts() (acked, failed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.acked {
		acked += len(m)
	}
	return acked, c.fails
}

// Report is the outcome of Verify.
type Report struct {
	Acked, Read, Failed int
	Lost                []string // acked, never read at its offset
	Duplicated          []string // one value at several offsets
	Inconsistent        []string // an offset with two values (acked vs read, or two reads/acks)
	Gaps                []string // offsets missing between the first and last read of a partition
}

// OK reports whether nothing was violated.
func (r Report) OK() bool {
	return len(r.Lost) == 0 && len(r.Duplicated) == 0 && len(r.Inconsistent) == 0 && len(r.Gaps) == 0
}

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d acked, %d failed, %d read: %d lost, %d duplicated, %d inconsistent offsets, %d gaps",
		r.Acked, r.Failed, r.Read, len(r.Lost), len(r.Duplicated), len(r.Inconsistent), len(r.Gaps))
	for _, l := range [][]string{r.Lost, r.Duplicated, r.Inconsistent, r.Gaps} {
		for i, s := range l {
			if i == 5 {
				fmt.Fprintf(&b, "\n  ... %d more", len(l)-5)
				break
			}
			b.WriteString("\n  ")
			b.WriteString(s)
		}
	}
	return b.String()
}

// Verify compares what was acked with what was read. Reads must cover each partition
// from its first offset (the log start) to its end.
func (c *Checker) Verify() Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	var r Report
	r.Failed = c.fails
	where := map[string]string{}
	tps := map[TP]bool{}
	for tp := range c.acked {
		tps[tp] = true
	}
	for tp := range c.read {
		tps[tp] = true
	}
	keys := make([]TP, 0, len(tps))
	for tp := range tps {
		keys = append(keys, tp)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Topic != keys[j].Topic {
			return keys[i].Topic < keys[j].Topic
		}
		return keys[i].Partition < keys[j].Partition
	})
	for _, tp := range keys {
		acked, read := c.acked[tp], c.read[tp]
		r.Acked += len(acked)
		r.Read += len(read)
		for off, v := range acked {
			got, ok := read[off]
			switch {
			case strings.Contains(v, "|"):
				r.Inconsistent = append(r.Inconsistent, fmt.Sprintf("%s/%d@%d acked twice: %s", tp.Topic, tp.Partition, off, v))
			case !ok:
				r.Lost = append(r.Lost, fmt.Sprintf("%s/%d@%d %q", tp.Topic, tp.Partition, off, v))
			case got != v:
				r.Inconsistent = append(r.Inconsistent, fmt.Sprintf("%s/%d@%d acked %q, read %q", tp.Topic, tp.Partition, off, v, got))
			}
		}
		offs := make([]int64, 0, len(read))
		for off := range read {
			offs = append(offs, off)
		}
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
		for i, off := range offs {
			v := read[off]
			if strings.Contains(v, "|") {
				r.Inconsistent = append(r.Inconsistent, fmt.Sprintf("%s/%d@%d read as %s", tp.Topic, tp.Partition, off, v))
			}
			at := fmt.Sprintf("%s/%d@%d", tp.Topic, tp.Partition, off)
			if prev, dup := where[v]; dup {
				r.Duplicated = append(r.Duplicated, fmt.Sprintf("%q at %s and %s", v, prev, at))
			} else {
				where[v] = at
			}
			if i > 0 && off != offs[i-1]+1 {
				r.Gaps = append(r.Gaps, fmt.Sprintf("%s/%d [%d, %d)", tp.Topic, tp.Partition, offs[i-1]+1, off))
			}
		}
	}
	sort.Strings(r.Lost)
	sort.Strings(r.Duplicated)
	sort.Strings(r.Inconsistent)
	return r
}
