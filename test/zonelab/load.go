package zonelab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Load is a measured workload: every zone produces BytesPerZone record bytes (split
// evenly over its Producers), then every Consumer in every zone reads the whole topic.
type Load struct {
	Topic      string
	Partitions int32 // created from the first zone before producing (default 2 per broker)
	// Producers and Consumers run in every zone (default: one Bench each).
	Producers, Consumers []Client
	BytesPerZone         int64
	RecordSize           int // default 1000
	Tagged               bool
}

// LoadReport is what a Load did and the veth traffic it caused.
type LoadReport struct {
	Produced, Consumed []ClientResult
	// ProducedBytes and ConsumedBytes are record value bytes, as the clients counted.
	ProducedBytes, ConsumedBytes int64
	// TopicRecords is what the topic holds after producing (end - start offsets).
	TopicRecords int64
	LeaderZone   map[int32]string
	// Traffic is the veth traffic from the first produce to the last consume.
	Traffic Counters
	// Share is Traffic.CrossZone / (ProducedBytes + ConsumedBytes).
	Share                          float64
	ProduceElapsed, ConsumeElapsed time.Duration
}

func (r LoadReport) String() string {
	var b strings.Builder
	for _, c := range append(append([]ClientResult(nil), r.Produced...), r.Consumed...) {
		fmt.Fprintln(&b, c)
	}
	var ps []int32
	for p := range r.LeaderZone {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	var lz []string
	for _, p := range ps {
		lz = append(lz, fmt.Sprintf("%d:%s", p, r.LeaderZone[p]))
	}
	fmt.Fprintf(&b, "leaders (partition:zone) %s\n", strings.Join(lz, " "))
	fmt.Fprintf(&b, "produced %d bytes in %v, consumed %d bytes in %v, topic holds %d records\n",
		r.ProducedBytes, r.ProduceElapsed.Round(time.Millisecond), r.ConsumedBytes, r.ConsumeElapsed.Round(time.Millisecond), r.TopicRecords)
	b.WriteString(r.Traffic.String())
	fmt.Fprintf(&b, "cross-zone share %.2f%% of the %d bytes produced + consumed\n", 100*r.Share, r.ProducedBytes+r.ConsumedBytes)
	return b.String()
}

// RunLoad runs ld and checks that nothing was lost: the topic holds every record the
// producers sent, and every consumer read all of them.
func (l *Lab) RunLoad(ctx context.Context, ld Load) (LoadReport, error) {
	var rep LoadReport
	if len(ld.Producers) == 0 {
		ld.Producers = []Client{Bench}
	}
	if len(ld.Consumers) == 0 {
		ld.Consumers = []Client{Bench}
	}
	if ld.RecordSize == 0 {
		ld.RecordSize = 1000
	}
	if ld.Partitions == 0 {
		ld.Partitions = int32(2 * len(l.Brokers))
	}
	if ld.Topic == "" || ld.BytesPerZone <= 0 {
		return rep, errors.New("zonelab: Load needs a Topic and BytesPerZone")
	}
	perClient := int(ld.BytesPerZone / int64(ld.RecordSize) / int64(len(ld.Producers)))
	if perClient < 1 {
		return rep, errors.New("zonelab: BytesPerZone is less than one record per producer")
	}
	if err := l.CreateTopic(ctx, l.zones[0], ld.Topic, ld.Partitions); err != nil {
		return rep, err
	}
	before, err := l.CrossZoneBytes()
	if err != nil {
		return rep, err
	}

	var specs []ProduceSpec
	for _, z := range l.zones {
		for _, c := range ld.Producers {
			specs = append(specs, ProduceSpec{Zone: z, Client: c, Topic: ld.Topic, Records: perClient, RecordSize: ld.RecordSize, Tagged: ld.Tagged})
		}
	}
	start := time.Now()
	rep.Produced = make([]ClientResult, len(specs))
	err = parallel(len(specs), func(i int) (err error) {
		rep.Produced[i], err = l.Produce(ctx, specs[i])
		return err
	})
	rep.ProduceElapsed = time.Since(start)
	if err != nil {
		return rep, err
	}
	var want int64
	for _, r := range rep.Produced {
		rep.ProducedBytes += r.Bytes
		want += r.Records
	}
	st, err := l.Topic(ctx, l.zones[0], ld.Topic)
	if err != nil {
		return rep, err
	}
	rep.TopicRecords, rep.LeaderZone = st.Records, st.LeaderZone
	if st.Records != want {
		return rep, fmt.Errorf("zonelab: the producers sent %d records, the topic holds %d; the producers' logs:\n%s", want, st.Records, l.clientLogs("client-*-kcat-p-*.log", "client-*-bench-produce-*.log"))
	}

	var cspecs []ConsumeSpec
	for _, z := range l.zones {
		for _, c := range ld.Consumers {
			cspecs = append(cspecs, ConsumeSpec{Zone: z, Client: c, Topic: ld.Topic, Tagged: ld.Tagged})
		}
	}
	start = time.Now()
	rep.Consumed = make([]ClientResult, len(cspecs))
	err = parallel(len(cspecs), func(i int) (err error) {
		rep.Consumed[i], err = l.Consume(ctx, cspecs[i])
		return err
	})
	rep.ConsumeElapsed = time.Since(start)
	if err != nil {
		return rep, err
	}
	for _, r := range rep.Consumed {
		rep.ConsumedBytes += r.Bytes
		if r.Records != want {
			err = errors.Join(err, fmt.Errorf("zonelab: %s: read %d records of %d", r, r.Records, want))
		}
	}
	after, cerr := l.CrossZoneBytes()
	if cerr != nil {
		return rep, errors.Join(err, cerr)
	}
	rep.Traffic = after.Sub(before)
	rep.Share = rep.Traffic.Share(rep.ProducedBytes + rep.ConsumedBytes)
	return rep, err
}

// Share is c.CrossZone as a fraction of recordBytes (the bytes produced plus consumed).
func (c Counters) Share(recordBytes int64) float64 {
	if recordBytes <= 0 {
		return 0
	}
	return float64(c.CrossZone) / float64(recordBytes)
}

// parallel runs fn(0..n-1) at once and returns their errors joined.
func parallel(n int, fn func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = fn(i) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// clientLogs returns the last lines of the client logs matching the patterns, for a
// failure's message (kcat reports failed deliveries only there).
func (l *Lab) clientLogs(patterns ...string) string {
	var b strings.Builder
	for _, pat := range patterns {
		files, _ := filepath.Glob(filepath.Join(l.cfg.Dir, pat))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
			fmt.Fprintf(&b, "--- %s (%d lines, last 15)\n%s\n", filepath.Base(f), len(lines), strings.Join(lines[max(0, len(lines)-15):], "\n"))
		}
	}
	return b.String()
}
