package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	// ErrTxnAborted marks a transaction the bench aborted because one of
	// its records failed.
	ErrTxnAborted = errors.New("bench: transaction aborted")
	// ErrTxnAllFailed is returned when no unit of work succeeded at all.
	ErrTxnAllFailed = errors.New("bench: every idempotent batch and transaction failed")
	// ErrTxnTopicTooSmall is returned when an existing topic has fewer
	// partitions than the largest --partitions-per-txn.
	ErrTxnTopicTooSmall = errors.New("bench: topic has too few partitions")
)

// txnRetryPause keeps a producer whose transactions fail (an unreachable
// coordinator, a refused transactional.id) from spinning.
const txnRetryPause = 100 * time.Millisecond

func runTxn(ctx context.Context, cfg *config, stdout, stderr io.Writer) error {
	out := progressWriter(cfg, stdout, stderr)
	res := &Result{Mode: "txn", Settings: cfg.settings, StartedAt: time.Now()}
	cfg.partitions = slices.Max(cfg.partitionsPerTxn)
	adm, err := newAdmin(cfg)
	if err != nil {
		return err
	}
	parts, err := adm.ensureTopic(ctx, cfg, out)
	adm.close()
	if err != nil {
		return err
	}
	if len(parts) < cfg.partitions {
		return fmt.Errorf("%w: %s has %d, --partitions-per-txn needs %d", ErrTxnTopicTooSmall, cfg.topic, len(parts), cfg.partitions)
	}
	payload := make([]byte, 1<<20+int(cfg.recordSize))
	_, _ = rand.Read(payload)
	tr := &TxnResult{RecordsPerTxn: cfg.recordsPerTxn, RecordSize: int(cfg.recordSize), Producers: cfg.producers}
	// Transactional ids unique to this run, so that a concurrent or
	// earlier run's producers are never fenced by (or fence) this one.
	runID := res.StartedAt.UnixNano()
	for _, p := range cfg.partitionsPerTxn {
		if ctx.Err() != nil {
			break
		}
		run := TxnRun{PartitionsPerTxn: p}
		for _, transactional := range []bool{false, true} {
			ph := &txnPhase{cfg: cfg, parts: parts, p: p, transactional: transactional, payload: payload,
				txnIDPrefix: fmt.Sprintf("weir-bench-txn-%d-p%d", runID, p)}
			m := ph.run(ctx)
			fmt.Fprintf(out, "%d partitions per txn, %-13s %s rec/s %.2f MB/s %.1f txn/s, %d failed\n",
				p, ph.name(), Commas(int64(m.RecordsPerSec+0.5)), m.MBPerSec, m.TransactionsPerSec, m.Failed)
			if transactional {
				run.Transactional = m
			} else {
				run.Idempotent = m
			}
		}
		if run.Idempotent.RecordsPerSec > 0 {
			run.ThroughputRatio = run.Transactional.RecordsPerSec / run.Idempotent.RecordsPerSec
		}
		tr.Runs = append(tr.Runs, run)
	}
	res.Txn = tr
	if err := finish(cfg, res, stdout, out); err != nil {
		return err
	}
	if ctx.Err() == nil && tr.succeeded() == 0 {
		return ErrTxnAllFailed
	}
	return nil
}

// txnPhase is one measurement: cfg.producers producers of one kind writing
// units of records-per-txn records over p partitions.
type txnPhase struct {
	cfg           *config
	parts         []int32 // the topic's partitions
	p             int
	transactional bool
	payload       []byte
	txnIDPrefix   string
	begin, end    time.Time // units begun in [begin, end) are measured
}

func (ph *txnPhase) name() string {
	if ph.transactional {
		return "transactional"
	}
	return "idempotent"
}

// txnTally is one producer's counts, merged after the phase.
type txnTally struct {
	units, failed, aborted, records, bytes int64
	firstErr                               error
	lat, commit                            *latencyStats
	last                                   time.Time // end of the last measured success
}

// run primes every producer with one unmeasured unit (connections,
// metadata, InitProducerID), then runs warmup + duration and sums up.
func (ph *txnPhase) run(ctx context.Context) TxnModeResult {
	cfg := ph.cfg
	tallies := make([]*txnTally, cfg.producers)
	clients := make([]*kgo.Client, cfg.producers)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			tallies[i] = &txnTally{lat: newLatencyStats(), commit: newLatencyStats()}
			cl, err := ph.newClient(i)
			if err == nil {
				_, err = ph.unit(ctx, cl, i, 0)
			}
			if err != nil {
				tallies[i].firstErr = fmt.Errorf("priming: %w", err)
			}
			clients[i] = cl
		})
	}
	wg.Wait()
	ph.begin = time.Now().Add(cfg.warmup)
	ph.end = ph.begin.Add(cfg.duration)
	for i := range clients {
		wg.Go(func() { ph.loop(ctx, clients[i], i, tallies[i]) })
	}
	wg.Wait()
	return ph.sum(tallies)
}

func (ph *txnPhase) newClient(idx int) (*kgo.Client, error) {
	opts := append(clientOpts(ph.cfg),
		kgo.DefaultProduceTopic(ph.cfg.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	if ph.transactional {
		opts = append(opts, kgo.TransactionalID(fmt.Sprintf("%s-%d", ph.txnIDPrefix, idx)))
	}
	return kgo.NewClient(opts...)
}

// loop runs units back to back (closed loop) until the phase ends. After a
// failed transaction the client is replaced: a new one re-inits the
// producer id, whatever state the failure left the old one in.
func (ph *txnPhase) loop(ctx context.Context, cl *kgo.Client, idx int, t *txnTally) {
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	var err error
	for k := 1; ; k++ {
		start := time.Now()
		if ctx.Err() != nil || !start.Before(ph.end) {
			return
		}
		if cl == nil {
			if cl, err = ph.newClient(idx); err != nil {
				t.fail(err, !start.Before(ph.begin))
				pause(ctx)
				continue
			}
		}
		commit, err := ph.unit(ctx, cl, idx, k)
		measured := !start.Before(ph.begin)
		if err != nil {
			t.fail(err, measured)
			if ph.transactional {
				cl.Close()
				cl = nil
			}
			pause(ctx)
			continue
		}
		if measured {
			now := time.Now()
			t.units++
			t.records += int64(ph.cfg.recordsPerTxn)
			t.bytes += int64(ph.cfg.recordsPerTxn) * int64(ph.cfg.recordSize)
			t.lat.add(now.Sub(start))
			if ph.transactional {
				t.commit.add(commit)
			}
			t.last = now
		}
	}
}

func (t *txnTally) fail(err error, measured bool) {
	if !measured {
		return
	}
	t.failed++
	if errors.Is(err, ErrTxnAborted) {
		t.aborted++
	}
	if t.firstErr == nil {
		t.firstErr = err
	}
}

func pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(txnRetryPause):
	}
}

// unit sends the k-th unit of producer idx and returns, for a transaction,
// how long the commit (EndTransaction) took.
func (ph *txnPhase) unit(ctx context.Context, cl *kgo.Client, idx, k int) (time.Duration, error) {
	recs := ph.records(idx, k)
	if !ph.transactional {
		return 0, cl.ProduceSync(ctx, recs...).FirstErr()
	}
	if err := cl.BeginTransaction(); err != nil {
		return 0, err
	}
	var mu sync.Mutex
	var produceErr error
	for _, r := range recs {
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			mu.Lock()
			produceErr = errors.Join(produceErr, err)
			mu.Unlock()
		})
	}
	flushErr := cl.Flush(ctx)
	mu.Lock()
	err := errors.Join(produceErr, flushErr)
	mu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrTxnAborted, errors.Join(err, cl.EndTransaction(ctx, kgo.TryAbort)))
	}
	start := time.Now()
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return time.Since(start), nil
}

// records builds one unit: record j goes to the (j mod p)-th of the p
// partitions starting at producer idx's offset, so several producers
// spread over the topic when it has room.
func (ph *txnPhase) records(idx, k int) []*kgo.Record {
	size := int(ph.cfg.recordSize)
	span := len(ph.payload) - size + 1
	recs := make([]*kgo.Record, ph.cfg.recordsPerTxn)
	for j := range recs {
		off := ((idx*7919 + k*ph.cfg.recordsPerTxn + j) * 4099) % span
		r := &kgo.Record{Value: make([]byte, size), Partition: ph.parts[(idx*ph.p+j%ph.p)%len(ph.parts)]}
		copy(r.Value, ph.payload[off:off+size])
		recs[j] = r
	}
	return recs
}

// sum merges the producers' tallies; the measured time runs from the end
// of warmup to the last measured success.
func (ph *txnPhase) sum(tallies []*txnTally) TxnModeResult {
	var m TxnModeResult
	lat, commit := newLatencyStats(), newLatencyStats()
	last := ph.begin
	for _, t := range tallies {
		m.Transactions += t.units
		m.Failed += t.failed
		m.Aborted += t.aborted
		m.Records += t.records
		m.Bytes += t.bytes
		if m.FirstError == "" && t.firstErr != nil {
			m.FirstError = t.firstErr.Error()
		}
		lat.merge(t.lat)
		commit.merge(t.commit)
		if t.last.After(last) {
			last = t.last
		}
	}
	m.DurationS = last.Sub(ph.begin).Seconds()
	m.RecordsPerSec = rate(m.Records, m.DurationS)
	m.MBPerSec = rate(m.Bytes, m.DurationS) / 1e6
	m.TransactionsPerSec = rate(m.Transactions, m.DurationS)
	if lat.count() > 0 {
		s := lat.summary()
		m.Latency = &s
	}
	if commit.count() > 0 {
		s := commit.summary()
		m.CommitLatency = &s
	}
	return m
}
