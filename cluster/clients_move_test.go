package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/weir-io/weir/internal/testutil"
)

// sarama and kafka-go, with the settings docs/CLIENTS.md recommends, produce through
// three graceful moves of their partition: every record is acked (none fails: the old
// leader's refusals are ones both retry), exactly once (the log ends where the acks do),
// and the longest wait for an ack across the moves is logged. Neither implements
// KIP-951: sarama refreshes its metadata on NOT_LEADER_OR_FOLLOWER, kafka-go's Writer
// retries until its metadata (Transport.MetadataTTL) names the new leader.
func TestGoClientsProduceThroughMoves(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster test")
	}
	c := startCluster(t, noBalancer)
	adm := kadm.NewClient(newClient(t, c))
	for _, tc := range []struct {
		name    string
		produce func(t *testing.T, topic string) (send func(i int) error, close func())
		// idempotent: the client deduplicates its retries (sarama with Idempotent);
		// kafka-go's Writer is at-least-once: a request whose answer is later than its
		// WriteTimeout is sent again and may be written twice, as with Kafka.
		idempotent bool
	}{
		{"sarama", saramaProducer(c), true},
		{"kafka-go", kafkaGoProducer(c), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "moves-" + tc.name
			if err := createTopic(t, adm, 1, topic); err != nil {
				t.Fatal(err)
			}
			tp := waitTopic(t, c, topic)
			send, closeFn := tc.produce(t, topic)
			var mu sync.Mutex
			acked, longest := 0, time.Duration(0)
			var sendErr error
			stop, done := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					start := time.Now()
					err := send(i)
					mu.Lock()
					if err != nil {
						sendErr = fmt.Errorf("record %d: %w", i, err)
						mu.Unlock()
						return
					}
					acked++
					longest = max(longest, time.Since(start))
					mu.Unlock()
					time.Sleep(5 * time.Millisecond) // on purpose: the producer's pace
				}
			}()
			count := func() int {
				mu.Lock()
				defer mu.Unlock()
				if sendErr != nil {
					t.Fatal(sendErr)
				}
				return acked
			}
			testutil.Eventually(t, 30*time.Second, "producing", func() bool { return count() > 20 })
			for round := 0; round < 3; round++ {
				// The leader now, not at creation: a busy machine may have failed it over
				// (and between a failover's fence and its completion there is none: -1).
				var leader int32
				testutil.Eventually(t, 30*time.Second, "the partition led", func() bool {
					cur, ok := c.partitionNow(topic, 0)
					leader = cur.Leader
					return ok && leader > 0 && !cur.Moving && !cur.Recovering
				})
				to := leader%3 + 1
				movePartition(t, c, to, tp, 0, to)
				mark := count()
				testutil.Eventually(t, 30*time.Second, "acks after the move", func() bool { return count() > mark+20 })
			}
			close(stop)
			<-done
			closeFn()
			n := count()
			t.Logf("%s: %d records acked through 3 moves; longest wait for an ack %v", tc.name, n, longest.Round(time.Millisecond))
			ends := endOffsets(t, adm, topic)
			end, _ := ends.Lookup(topic, 0)
			// Only an idempotent client must see each record once. An at-least-once one
			// retries a batch the broker synced and then could not ack (the partition
			// moved or the lease lapsed between the sync and the ack; the connection
			// closed first), as Kafka's follower keeps a record its old leader answered
			// NOT_LEADER for: a duplicate, never a loss (CI saw one after a 3.6 s ack).
			if tc.idempotent {
				if end.Offset != int64(n) {
					t.Fatalf("the log ends at %d, %d records were acked (a retry was written twice, or an ack lied)", end.Offset, n)
				}
				return
			}
			// Every acked record must be there, nothing that was not sent, and
			// duplicates only of records it sent again.
			got := consumeValues(t, c, topic, int(end.Offset))
			seen := map[string]int{}
			for _, v := range got {
				seen[v]++
			}
			for i := 0; i < n; i++ {
				if seen[fmt.Sprintf("r-%05d", i)] == 0 {
					t.Errorf("acked record r-%05d is not in the log", i)
				}
			}
			if len(seen) != n {
				t.Errorf("the log holds %d distinct records, %d were acked", len(seen), n)
			}
			t.Logf("%s: the log holds %d records for %d acked (a retry after the %v ack)", tc.name, end.Offset, n, longest.Round(time.Millisecond))
		})
	}
}

// saramaProducer is a sarama idempotent SyncProducer with docs/CLIENTS.md's settings.
func saramaProducer(c *Cluster) func(t *testing.T, topic string) (func(int) error, func()) {
	return func(t *testing.T, topic string) (func(int) error, func()) {
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V3_6_0_0
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Return.Successes = true
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
		// docs/CLIENTS.md, sarama.
		backoff := func(retries, _ int) time.Duration { return min(50*time.Millisecond<<min(retries, 5), time.Second) }
		cfg.Producer.Retry.Max = 30
		cfg.Producer.Retry.BackoffFunc = backoff
		cfg.Metadata.Retry.Max = 10
		cfg.Metadata.Retry.BackoffFunc = backoff
		cfg.Net.DialTimeout = 5 * time.Second
		cfg.Net.ReadTimeout = 5 * time.Second
		cfg.Net.WriteTimeout = 5 * time.Second
		p, err := sarama.NewSyncProducer(c.KafkaAddrs(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		send := func(i int) error {
			_, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder(fmt.Sprintf("r-%05d", i))})
			return err
		}
		return send, func() { p.Close() }
	}
}

// kafkaGoProducer is a kafka-go Writer with docs/CLIENTS.md's settings.
func kafkaGoProducer(c *Cluster) func(t *testing.T, topic string) (func(int) error, func()) {
	return func(t *testing.T, topic string) (func(int) error, func()) {
		w := &kafka.Writer{
			Addr: kafka.TCP(c.KafkaAddrs()...), Topic: topic, Balancer: kafka.BalancerFunc(func(kafka.Message, ...int) int { return 0 }),
			RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond,
			// docs/CLIENTS.md, kafka-go.
			MaxAttempts: 20, WriteBackoffMin: 50 * time.Millisecond, WriteBackoffMax: 500 * time.Millisecond,
			ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
			Transport: &kafka.Transport{MetadataTTL: time.Second, DialTimeout: 5 * time.Second},
		}
		noLeader := 0
		send := func(i int) error {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for {
				err := w.WriteMessages(ctx, kafka.Message{Value: fmt.Appendf(nil, "r-%05d", i)})
				// The Writer gives up at once, without sending, when its cached Metadata
				// names no leader (LEADER_NOT_AVAILABLE: a graceful move never answers it,
				// but a broker fenced on a loaded machine does, until its taker has
				// recovered the partition). docs/CLIENTS.md tells kafka-go applications
				// to retry it, as here; the log still must end where the acks do.
				var we kafka.WriteErrors
				if errors.As(err, &we) && len(we) == 1 && errors.Is(we[0], protocol.ErrNoLeader) && ctx.Err() == nil {
					noLeader++
					t.Logf("record %d: %v (retry %d)", i, err, noLeader)
					time.Sleep(100 * time.Millisecond) // on purpose: the app's backoff before asking again
					continue
				}
				return err
			}
		}
		return send, func() { w.Close() }
	}
}

// consumeValues reads want records of the one-partition topic from its start and returns
// their values in offset order (duplicates kept, unlike consumeAll).
func consumeValues(t *testing.T, c *Cluster, topic string, want int) []string {
	t.Helper()
	cl := newClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := ctxFor(t, 90*time.Second)
	var got []string
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", len(got), want)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}
