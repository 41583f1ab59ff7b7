package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// defaultClientID is the client.id of the bench's clients unless --client-id is given.
const defaultClientID = "weir-bench"

// clientOpts are the options every Kafka client of the bench gets: its seeds, its
// client.id (--client-id), with --rack its rack, and its TLS and SASL settings.
func clientOpts(cfg *config) []kgo.Opt {
	id := cfg.clientID
	if id == "" {
		id = defaultClientID
	}
	opts := []kgo.Opt{kgo.SeedBrokers(seeds(cfg)...), kgo.ClientID(id)}
	if cfg.rack != "" {
		opts = append(opts, kgo.Rack(cfg.rack))
	}
	return append(opts, cfg.secOpts...)
}

func seeds(cfg *config) []string {
	var out []string
	for _, s := range strings.Split(cfg.bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func codec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("--compression must be none, gzip, snappy, lz4 or zstd, not %q", name)
}

// admin is a kadm client with its own connection, closed by close().
type admin struct {
	cl  *kgo.Client
	adm *kadm.Client
}

func newAdmin(cfg *config) (*admin, error) {
	// A short MetadataMinAge: kgo serves repeated metadata requests from a
	// cache for that long (5 s by default), which would make waiting for
	// a just-created topic take 5 s.
	cl, err := kgo.NewClient(append(clientOpts(cfg), kgo.MetadataMinAge(100*time.Millisecond))...)
	if err != nil {
		return nil, err
	}
	return &admin{cl: cl, adm: kadm.NewClient(cl)}, nil
}

func (a *admin) close() { a.cl.Close() }

// partitions returns the sorted partition ids of topic, or an error wrapping
// kerr.UnknownTopicOrPartition if it does not exist.
func (a *admin) partitions(ctx context.Context, topic string) ([]int32, error) {
	td, err := a.adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list topic %s: %w", topic, err)
	}
	d, ok := td[topic]
	if !ok {
		return nil, fmt.Errorf("topic %s: %w", topic, kerr.UnknownTopicOrPartition)
	}
	if d.Err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, d.Err)
	}
	var ps []int32
	for p, pd := range d.Partitions {
		if pd.Leader < 0 || pd.Err != nil {
			return nil, fmt.Errorf("topic %s partition %d has no leader yet: %w", topic, p, kerr.LeaderNotAvailable)
		}
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps, nil
}

// ensureTopic creates the topic with cfg.partitions if it is missing and
// waits (up to 30 s) until every partition has a leader, so that the first
// records are not failed by metadata that has not caught up yet.
func (a *admin) ensureTopic(ctx context.Context, cfg *config, out io.Writer) ([]int32, error) {
	ps, err := a.partitions(ctx, cfg.topic)
	if err == nil {
		if len(ps) != cfg.partitions && (cfg.explicit["partitions"] || cfg.preset != "") {
			fmt.Fprintf(out, "note: topic %s exists with %d partitions, not %d; using it as it is\n", cfg.topic, len(ps), cfg.partitions)
		}
		return ps, nil
	}
	if !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kerr.LeaderNotAvailable) {
		return nil, err
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		// -1: the broker's default replication factor.
		_, err = a.adm.CreateTopic(ctx, int32(cfg.partitions), -1, nil, cfg.topic)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return nil, fmt.Errorf("create topic %s: %w", cfg.topic, err)
		}
		fmt.Fprintf(out, "created topic %s with %d partitions\n", cfg.topic, cfg.partitions)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ps, err = a.partitions(ctx, cfg.topic)
		if err == nil && len(ps) > 0 {
			return ps, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("topic %s not ready after 30s: %w", cfg.topic, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// offsets lists the start or end offset of every partition of topic.
func (a *admin) offsets(ctx context.Context, topic string, end bool) (map[int32]int64, error) {
	list := a.adm.ListStartOffsets
	if end {
		list = a.adm.ListEndOffsets
	}
	// A partition's leader may not know a just-created topic yet (each broker's view
	// follows the controllers a moment later), and a leader may be moving: those
	// answers are retriable, as every Kafka client treats them. So is a broker that
	// cannot be reached (restarting after a fence): its partitions move or it comes back.
	deadline := time.Now().Add(30 * time.Second)
	var lo kadm.ListedOffsets
	for {
		var err error
		lo, err = list(ctx, topic)
		if err == nil {
			err = lo.Error()
		}
		if err == nil {
			break
		}
		var ke *kerr.Error
		fatal := errors.As(err, &ke) && !ke.Retriable
		if fatal || ctx.Err() != nil || time.Now().After(deadline) {
			return nil, fmt.Errorf("list offsets of %s: %w", topic, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond): // the client's retry backoff
		}
	}
	out := map[int32]int64{}
	for p, o := range lo[topic] {
		out[p] = o.Offset
	}
	return out, nil
}

// commit sets group's committed offsets for topic, so that its members start
// exactly there whatever order they join and rebalance in. It only works
// while the group has no members.
func (a *admin) commit(ctx context.Context, group, topic string, offs map[int32]int64) error {
	os := kadm.Offsets{}
	for p, o := range offs {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	return a.adm.CommitAllOffsets(ctx, group, os)
}
