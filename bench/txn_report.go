package bench

import (
	"fmt"
	"io"
)

// TxnResult is `weir bench txn`: per --partitions-per-txn value, the same
// work done by an idempotent and by a transactional producer.
type TxnResult struct {
	RecordsPerTxn int      `json:"records_per_txn"`
	RecordSize    int      `json:"record_size"`
	Producers     int      `json:"producers"`
	Runs          []TxnRun `json:"runs"`
}

// TxnRun is one partitions-per-transaction value.
type TxnRun struct {
	PartitionsPerTxn int           `json:"partitions_per_txn"`
	Idempotent       TxnModeResult `json:"idempotent"`
	Transactional    TxnModeResult `json:"transactional"`
	// ThroughputRatio is transactional / idempotent records/s: the share
	// of plain produce throughput left once every batch is a transaction.
	ThroughputRatio float64 `json:"throughput_ratio"`
}

// TxnModeResult covers the units of work begun after warmup. A unit is
// records-per-txn records: one transaction, or one ProduceSync call of the
// idempotent baseline (so both modes count "transactions").
type TxnModeResult struct {
	// Transactions is the units that succeeded (committed, or acked).
	Transactions int64 `json:"transactions"`
	// Failed is the units that failed (among them Aborted: a record of
	// the transaction failed and it was aborted); FirstError says why.
	Failed             int64   `json:"failed"`
	Aborted            int64   `json:"aborted,omitempty"`
	FirstError         string  `json:"first_error,omitempty"`
	Records            int64   `json:"records"`
	Bytes              int64   `json:"bytes"`
	DurationS          float64 `json:"duration_s"`
	RecordsPerSec      float64 `json:"records_per_sec"`
	MBPerSec           float64 `json:"mb_per_sec"`
	TransactionsPerSec float64 `json:"transactions_per_sec"`
	// Latency is per successful unit: the ProduceSync call, or
	// BeginTransaction to the end of the commit.
	Latency *LatencySummary `json:"latency_ms,omitempty"`
	// CommitLatency is EndTransaction(TryCommit) alone (transactional only).
	CommitLatency *LatencySummary `json:"commit_latency_ms,omitempty"`
}

// succeeded is how many units succeeded over the whole run.
func (t *TxnResult) succeeded() int64 {
	var n int64
	for _, r := range t.Runs {
		n += r.Idempotent.Transactions + r.Transactional.Transactions
	}
	return n
}

func printTxnTable(w io.Writer, t *TxnResult) {
	fmt.Fprintf(w, "\n== txn: %d records of %s per transaction, %d producer(s); latency ms (idempotent: the ProduceSync call; transactional: begin to commit)\n",
		t.RecordsPerTxn, formatSize(t.RecordSize), t.Producers)
	fmt.Fprintf(w, "%5s  %-13s %10s %8s %8s  %8s %8s  %8s %8s %8s  %6s  %s\n",
		"parts", "producer", "rec/s", "MB/s", "txn/s", "lat p50", "lat p99", "cmt p50", "cmt p99", "cmt max", "failed", "txn/idem")
	for _, r := range t.Runs {
		fmt.Fprintln(w, txnRow(r.PartitionsPerTxn, "idempotent", &r.Idempotent, ""))
		fmt.Fprintln(w, txnRow(r.PartitionsPerTxn, "transactional", &r.Transactional, fmt.Sprintf("%.2f", r.ThroughputRatio)))
	}
	for _, r := range t.Runs {
		for _, m := range []struct {
			name string
			res  *TxnModeResult
		}{{"idempotent", &r.Idempotent}, {"transactional", &r.Transactional}} {
			if m.res.FirstError != "" {
				fmt.Fprintf(w, "   %d partitions, %s: %d failed (%d aborted), first: %s\n",
					r.PartitionsPerTxn, m.name, m.res.Failed, m.res.Aborted, m.res.FirstError)
			}
		}
	}
}

func txnRow(parts int, name string, m *TxnModeResult, ratio string) string {
	lat := func(l *LatencySummary, f func(*LatencySummary) float64) string {
		if l == nil {
			return "-"
		}
		return ms(f(l))
	}
	p50 := func(l *LatencySummary) float64 { return l.P50 }
	p99 := func(l *LatencySummary) float64 { return l.P99 }
	mx := func(l *LatencySummary) float64 { return l.Max }
	return fmt.Sprintf("%5d  %-13s %10s %8.2f %8.1f  %8s %8s  %8s %8s %8s  %6s  %s",
		parts, name, Commas(int64(m.RecordsPerSec+0.5)), m.MBPerSec, m.TransactionsPerSec,
		lat(m.Latency, p50), lat(m.Latency, p99),
		lat(m.CommitLatency, p50), lat(m.CommitLatency, p99), lat(m.CommitLatency, mx),
		Commas(m.Failed), ratio)
}
