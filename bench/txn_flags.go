package bench

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// intList is a flag.Value for a comma-separated list of positive integers.
type intList []int

func (l *intList) String() string {
	parts := make([]string, len(*l))
	for i, n := range *l {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

func (l *intList) Set(s string) error {
	var out intList
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		n, err := strconv.Atoi(part)
		if err != nil || n < 1 {
			return fmt.Errorf("%q is not a positive integer", part)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

// bindTxnFlags registers the flags of `weir bench txn` beyond the connection
// flags every Kafka mode has; it has no rate, acks or compression because
// it compares the two producer kinds under the same closed loop.
func bindTxnFlags(fs *flag.FlagSet, cfg *config) {
	cfg.partitionsPerTxn = intList{1, 10}
	fs.Var(&cfg.partitionsPerTxn, "partitions-per-txn", "comma-separated `counts` of partitions each transaction (and each idempotent batch) writes to; one measurement per value. The topic is created with the largest")
	fs.IntVar(&cfg.recordsPerTxn, "records-per-txn", 100, "`records` per transaction, spread round-robin over its partitions; the idempotent baseline sends as many per ProduceSync call")
	fs.IntVar(&cfg.producers, "producers", 1, "producer clients per measurement, each with its own transactional.id and connections")
	fs.Var(&cfg.recordSize, "record-size", "value size of each record in `bytes` (units B, KiB, MiB accepted); values are incompressible random bytes")
	fs.DurationVar(&cfg.warmup, "warmup", 2*time.Second, "sending time before measuring starts, per measurement and producer kind")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "measured time per measurement and producer kind (a run takes 2 x values x (warmup + duration))")
	fs.Usage = func() {
		usageOf(fs, "txn [flags]", "For each --partitions-per-txn value P, in one run: an idempotent producer sends --records-per-txn records over\n"+
			"P partitions with ProduceSync in a closed loop, then a transactional producer loops BeginTransaction, the same\n"+
			"records (Produce, Flush), EndTransaction(commit). Reports records/s, MB/s, transactions/s, commit latency\n"+
			"(EndTransaction) and transaction latency (begin to commit), and transactional / idempotent throughput.\n"+
			"MB = 10^6 bytes; latency in ms.")
	}
}

func (c *config) validateTxn() error {
	if len(c.partitionsPerTxn) == 0 {
		return errors.New("--partitions-per-txn is empty")
	}
	if c.recordsPerTxn < 1 || c.producers < 1 {
		return errors.New("--records-per-txn and --producers must be at least 1")
	}
	if c.recordSize < 1 {
		return errors.New("--record-size must be at least 1 byte")
	}
	if c.duration <= 0 {
		return errors.New("--duration must be positive")
	}
	return nil
}
