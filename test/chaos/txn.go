package chaos

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The transactional mode (--txn): TxnWriters franz-go producers, each with its own
// transactional id, loop begin, produce TxnRecords records with unique values (writer,
// transaction, record) over the partitions, then commit, or abort one transaction in
// five on purpose. Each transaction's outcome is kept as the client saw it: committed
// (EndTransaction(TryCommit) returned nil), aborted (on purpose, the abort returned
// nil) or unknown (an error anywhere; the writer then closes its client and opens a new
// one with the same id, whose InitProducerID fences the old epoch and ends whatever it
// left open). At the end a read_committed consumer reads the topic from its start and
// checkTxns compares.
//
// The writers use their own topic, the load's topic with "-txn" (as many partitions, so
// the same faults hit its leaders): the verified load's readers read until the high
// watermark by the offsets of the records they get, which a partition ending in a
// transaction marker (a control record no client returns) would never reach, and its
// read_uncommitted readers would see aborted records.

// txnTopic is the transactional writers' topic.
func (c *Config) txnTopic() string { return c.Topic + "-txn" }

// txnID is writer w's transactional id.
func (c *Config) txnID(w int) string { return fmt.Sprintf("chaos-%s-txn-%d", c.Topic, w) }

// Transaction outcomes as the client saw them.
const (
	txnCommitted = "committed"
	txnAborted   = "aborted"
	txnUnknown   = "unknown"
	// txnExpired: open past its timeout (txn-producer-pause), so the coordinator must
	// have aborted it whatever the client heard; its records must never be read.
	txnExpired = "expired"
)

// txnKey names a transaction: writer and its transaction number.
type txnKey struct{ writer, n int }

// txnState is one transaction as its writer saw it.
type txnState struct {
	outcome string
	// commitSent: EndTransaction(TryCommit) was called. A transaction never asked to
	// commit can never become visible, whatever its outcome.
	commitSent bool
	err        string
	// ended: when the client heard the outcome it asked for (committed, or aborted on
	// purpose).
	ended time.Time
}

// TxnReport is what the read_committed checker found.
type TxnReport struct {
	Writers    int `json:"writers"`
	Records    int `json:"records_per_txn"`
	Committed  int `json:"committed"`
	Aborted    int `json:"aborted"`
	Unknown    int `json:"unknown"`
	Expired    int `json:"expired,omitempty"` // aborted by the coordinator past their timeout (txn-producer-pause)
	Read       int `json:"read"`              // transactional records read with read_committed
	Violations int `json:"violations"`
	// Examples are the first violations, and the first errors behind unknown outcomes.
	Examples []string `json:"examples,omitempty"`
	Errors   []string `json:"errors,omitempty"`
	// CTP is the consume-transform-produce writer's check (txnctp.go).
	CTP *CTPReport `json:"ctp,omitempty"`
}

// OK reports whether neither check found a violation.
func (r *TxnReport) OK() bool { return r.Violations == 0 && (r.CTP == nil || r.CTP.Violations == 0) }

// maxTxnExamples bounds Examples and Errors.
const maxTxnExamples = 20

// txnLoad runs the transactional writers.
type txnLoad struct {
	cfg  Config
	boot []string

	mu   sync.Mutex
	txns map[txnKey]*txnState
	// faultWriters counts the writers faults ran (txnfaults.go), numbered after the
	// load's.
	faultWriters int

	stop context.CancelFunc
	wg   sync.WaitGroup
}

func txnValue(w, n, r int) string { return fmt.Sprintf("txn-%d-%d-%d", w, n, r) }

// parseTxnValue reads a value txnValue wrote.
func parseTxnValue(v string) (txnKey, int, bool) {
	parts := strings.Split(v, "-")
	if len(parts) != 4 || parts[0] != "txn" {
		return txnKey{}, 0, false
	}
	var n [3]int
	for i, p := range parts[1:] {
		x, err := strconv.Atoi(p)
		if err != nil {
			return txnKey{}, 0, false
		}
		n[i] = x
	}
	return txnKey{n[0], n[1]}, n[2], true
}

func startTxnLoad(ctx context.Context, cfg Config, boot []string) *txnLoad {
	t := &txnLoad{cfg: cfg, boot: boot, txns: map[txnKey]*txnState{}}
	ctx, t.stop = context.WithCancel(ctx)
	for w := 0; w < cfg.TxnWriters; w++ {
		t.wg.Add(1)
		go t.write(ctx, w)
	}
	return t
}

// client is writer w's, with transaction.timeout.ms timeout.
func (t *txnLoad) client(w int, timeout time.Duration) (*kgo.Client, error) {
	return kgo.NewClient(append(clientOpts(t.boot), kgo.TransactionalID(t.cfg.txnID(w)),
		kgo.TransactionTimeout(timeout), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(20*time.Second))...)
}

// write runs writer w's transactions until ctx ends (never in the middle of one).
func (t *txnLoad) write(ctx context.Context, w int) {
	defer t.wg.Done()
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	for n := 0; ctx.Err() == nil; n++ {
		if cl == nil {
			var err error
			if cl, err = t.client(w, 15*time.Second); err != nil {
				n-- // nothing began
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
				continue
			}
		}
		st := &txnState{outcome: txnUnknown}
		t.mu.Lock()
		t.txns[txnKey{w, n}] = st
		t.mu.Unlock()
		if !t.one(cl, w, n, st) {
			// After an error the client's state is the client's; a new one with the same
			// transactional id fences it and ends what it left open.
			cl.Close()
			cl = nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// one runs transaction n of writer w and records its outcome in st (under t.mu); it
// returns false when the client should not be used again.
func (t *txnLoad) one(cl *kgo.Client, w, n int, st *txnState) bool {
	// Not the run's context: the load stops between transactions, never in one.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	set := func(outcome string, commitSent bool, err error) {
		t.mu.Lock()
		defer t.mu.Unlock()
		st.outcome, st.commitSent = outcome, commitSent
		if outcome == txnCommitted || outcome == txnAborted {
			st.ended = time.Now()
		}
		if err != nil {
			st.err = err.Error()
		}
	}
	if err := cl.BeginTransaction(); err != nil {
		set(txnUnknown, false, err)
		return false
	}
	recs := make([]*kgo.Record, t.cfg.TxnRecords)
	for r := range recs {
		p := int32((n*t.cfg.TxnRecords + r + w) % t.cfg.Partitions)
		recs[r] = &kgo.Record{Topic: t.cfg.txnTopic(), Partition: p, Value: []byte(txnValue(w, n, r))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		aerr := cl.AbortBufferedRecords(ctx)
		if aerr == nil {
			aerr = cl.EndTransaction(ctx, kgo.TryAbort)
		}
		set(txnUnknown, false, err)
		return aerr == nil
	}
	if n%5 == 4 { // one in five aborted on purpose
		if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
			set(txnUnknown, false, err)
			return false
		}
		set(txnAborted, false, nil)
		return true
	}
	set(txnUnknown, true, nil) // from here a commit may happen whatever the client hears
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		set(txnUnknown, true, err)
		return false
	}
	set(txnCommitted, true, nil)
	return true
}

// firstEndAfter is when writer w first heard a transaction's outcome after at.
func (t *txnLoad) firstEndAfter(w int, at time.Time) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var first time.Time
	for k, st := range t.txns {
		if k.writer == w && st.ended.After(at) && (first.IsZero() || st.ended.Before(first)) {
			first = st.ended
		}
	}
	return first, !first.IsZero()
}

// recovered waits up to a minute for writer w to end a transaction after at (the kill of
// its coordinator) and says how long that took: the time the transaction in flight
// at the kill, or the next one, needed to find the new coordinator and end there.
func (t *txnLoad) recovered(ctx context.Context, w int, at time.Time) string {
	deadline := time.Now().Add(time.Minute)
	for {
		if end, ok := t.firstEndAfter(w, at); ok {
			return fmt.Sprintf("writer %d's first transaction ended %v after the kill", w, end.Sub(at).Round(time.Millisecond))
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Sprintf("writer %d ended no transaction within a minute of the kill", w)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// finish stops the writers after their current transaction.
func (t *txnLoad) finish() {
	t.stop()
	t.wg.Wait()
}

// readBack reads the topic with read_committed (readCommitted): how many times each
// value was read.
func (t *txnLoad) readBack(ctx context.Context) (map[string]int, error) {
	return readCommitted(ctx, t.boot, t.cfg.txnTopic(), t.cfg.Partitions)
}

// report checks what was read against the outcomes.
func (t *txnLoad) report(reads map[string]int) *TxnReport {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := checkTxns(t.txns, t.cfg.TxnRecords, reads)
	r.Writers = t.cfg.TxnWriters + t.faultWriters
	return r
}

// checkTxns verifies what a read_committed reader read (value → times read) against
// the transactions' outcomes with k records each: a committed transaction's records
// all present, each once; an aborted one's, or one never asked to commit, absent; an
// unknown one's all present (once) or all absent; nothing read that no transaction
// wrote.
func checkTxns(txns map[txnKey]*txnState, k int, reads map[string]int) *TxnReport {
	r := &TxnReport{Records: k}
	violate := func(format string, args ...any) {
		r.Violations++
		if len(r.Examples) < maxTxnExamples {
			r.Examples = append(r.Examples, fmt.Sprintf(format, args...))
		}
	}
	seen := map[txnKey][]int{} // per transaction, times each record was read
	values := make([]string, 0, len(reads))
	for v := range reads {
		values = append(values, v)
	}
	sort.Strings(values) // examples in a stable order
	for _, v := range values {
		r.Read += reads[v]
		key, rec, ok := parseTxnValue(v)
		if !ok || txns[key] == nil || rec < 0 || rec >= k {
			violate("%q read %d times: no transaction wrote it", v, reads[v])
			continue
		}
		if seen[key] == nil {
			seen[key] = make([]int, k)
		}
		seen[key][rec] = reads[v]
	}
	keys := make([]txnKey, 0, len(txns))
	for key := range txns {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].writer < keys[j].writer || keys[i].writer == keys[j].writer && keys[i].n < keys[j].n
	})
	for _, key := range keys {
		st := txns[key]
		switch st.outcome {
		case txnCommitted:
			r.Committed++
		case txnAborted:
			r.Aborted++
		case txnExpired:
			r.Expired++
		default:
			r.Unknown++
			if st.err != "" && len(r.Errors) < maxTxnExamples {
				r.Errors = append(r.Errors, fmt.Sprintf("writer %d txn %d: %s", key.writer, key.n, st.err))
			}
		}
		counts := seen[key]
		present, dup := 0, false
		for _, c := range counts {
			if c > 0 {
				present++
			}
			dup = dup || c > 1
		}
		name := fmt.Sprintf("writer %d txn %d (%s)", key.writer, key.n, st.outcome)
		switch {
		case dup:
			violate("%s: a record read more than once %v", name, counts)
		case st.outcome == txnExpired && present > 0:
			violate("%s, aborted by the coordinator past its timeout: %d of its %d records read", name, present, k)
		case st.outcome == txnCommitted && present != k:
			violate("%s: %d of its %d records read", name, present, k)
		case !st.commitSent && present > 0:
			violate("%s, never asked to commit: %d of its %d records read", name, present, k)
		case present != 0 && present != k:
			violate("%s: %d of its %d records read (not atomic)", name, present, k)
		}
	}
	return r
}

// String is the report's line.
func (r *TxnReport) String() string {
	s := fmt.Sprintf("transactions of %d writers (%d records each): %d committed, %d aborted on purpose, %d unknown, %d expired; %d transactional records read with read_committed; %d violations",
		r.Writers, r.Records, r.Committed, r.Aborted, r.Unknown, r.Expired, r.Read, r.Violations)
	for _, e := range r.Examples {
		s += "\n  violation: " + e
	}
	for _, e := range r.Errors {
		s += "\n  unknown outcome: " + e
	}
	if r.CTP != nil {
		s += "\n" + r.CTP.String()
	}
	return s
}
