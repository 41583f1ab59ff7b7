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
	mu      sync.Mutex
	acked   map[TP]map[int64]string // offset → value
	read    map[TP]map[int64]string
	fails   int
	commits map[groupTP]*commitState
	group   []string // group violations found as they happen
}

type groupTP struct {
	group string
	tp    TP
}

// commitState is what a group committed for a partition: the highest offset a commit
// acknowledged, and the highest one any commit tried (a commit whose answer is still
// out may or may not have been applied).
type commitState struct {
	acked, tried int64
}

// New returns an empty checker.
func New() *Checker {
	return &Checker{acked: map[TP]map[int64]string{}, read: map[TP]map[int64]string{}, commits: map[groupTP]*commitState{}}
}

// Committing records that a member of group is committing offset for tp.
func (c *Checker) Committing(group string, tp TP, offset int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.commit(group, tp)
	st.tried = max(st.tried, offset)
}

// Committed records that the coordinator acknowledged group's commit of offset for tp.
func (c *Checker) Committed(group string, tp TP, offset int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.commit(group, tp)
	st.acked = max(st.acked, offset)
	st.tried = max(st.tried, offset)
}

func (c *Checker) commit(group string, tp TP) *commitState {
	k := groupTP{group, tp}
	st := c.commits[k]
	if st == nil {
		st = &commitState{acked: -1, tried: -1}
		c.commits[k] = st
	}
	return st
}

// Resumed records the first offset a member of group read of tp after it was given the
// partition. A group resumes where it committed: below the last acknowledged commit is a
// re-read of records the group had already confirmed, above the last tried commit is a
// skip of records nobody confirmed. Without any commit the start is not checked (the
// reset policy decides).
func (c *Checker) Resumed(group string, tp TP, offset int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.commits[groupTP{group, tp}]
	if st == nil || st.tried < 0 {
		return
	}
	switch {
	case st.acked >= 0 && offset < st.acked:
		c.group = append(c.group, fmt.Sprintf("group %s re-read %s/%d from %d, below its acknowledged commit %d", group, tp.Topic, tp.Partition, offset, st.acked))
	case offset > st.tried:
		c.group = append(c.group, fmt.Sprintf("group %s skipped %s/%d [%d, %d): resumed above every commit", group, tp.Topic, tp.Partition, st.tried, offset))
	}
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
	Group               []string // a consumer group resumed away from its committed offset
}

// OK reports whether nothing was violated.
func (r Report) OK() bool {
	return len(r.Lost) == 0 && len(r.Duplicated) == 0 && len(r.Inconsistent) == 0 && len(r.Gaps) == 0 && len(r.Group) == 0
}

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d acked, %d failed, %d read: %d lost, %d duplicated, %d inconsistent offsets, %d gaps, %d group resumes off their commits",
		r.Acked, r.Failed, r.Read, len(r.Lost), len(r.Duplicated), len(r.Inconsistent), len(r.Gaps), len(r.Group))
	for _, l := range [][]string{r.Lost, r.Duplicated, r.Inconsistent, r.Gaps, r.Group} {
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
	r.Group = append([]string(nil), c.group...)
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
