package bench

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// tsHeader carries the send time when values are too small for it (< 8 B).
const tsHeader = "weir-bench-ts"

func runProduce(ctx context.Context, cfg *config, stdout, stderr io.Writer) error {
	out := progressWriter(cfg, stdout, stderr)
	res := &Result{Mode: "produce", Settings: cfg.settings, StartedAt: time.Now()}
	adm, err := newAdmin(cfg)
	if err != nil {
		return err
	}
	_, err = adm.ensureTopic(ctx, cfg, out)
	adm.close()
	if err != nil {
		return err
	}
	pr, err := newProducerRun(cfg)
	if err != nil {
		return err
	}
	defer pr.close()
	printProduceHeader(out, cfg)
	pr.start()
	st := &stream{name: "produce", rec: pr.rec}
	stop := make(chan struct{})
	done := runProgress(stop, cfg.interval, pr.begin, out, st)
	pr.run(ctx, out)
	close(stop)
	<-done
	res.Produce = pr.result(st.series)
	if cfg.walDir != "" && ctx.Err() == nil {
		fmt.Fprintf(out, "measuring the disk limit of %s ...\n", cfg.walDir)
		res.Disk, err = compareDisk(ctx, cfg, res.Produce)
		if err != nil {
			fmt.Fprintf(out, "disk limit: %v\n", err)
		}
	}
	return finish(cfg, res, stdout, out)
}

func printProduceHeader(out io.Writer, cfg *config) {
	r := "unlimited (closed loop)"
	if cfg.rate > 0 {
		r = fmt.Sprintf("%s rec/s (open loop)", Commas(int64(cfg.rate)))
	}
	fmt.Fprintf(out, "producing to %s on %s: %d producer(s), %s records, rate %s, acks=%s, linger %v, batch %s, compression %s, idempotent %v\n",
		cfg.topic, cfg.bootstrap, cfg.producers, formatSize(int(cfg.recordSize)), r, cfg.acks, cfg.linger, humanSize(int(cfg.batchBytes)), cfg.compression, cfg.idempotent)
	if cfg.warmup > 0 {
		fmt.Fprintf(out, "warming up for %v ...\n", cfg.warmup)
	}
}

// producerRun drives cfg.producers clients and records the acks of the
// records sent after warmup.
type producerRun struct {
	cfg       *config
	clients   []*kgo.Client
	closeOnce sync.Once
	payload   []byte // random source the record values are cut from

	startAt time.Time // sending starts; the schedule is relative to it
	begin   time.Time // measuring starts (startAt + warmup)
	rec     *recorder

	sent    atomic.Int64 // measured records handed to a client
	claimed atomic.Int64 // measured records reserved against --records
	sendEnd atomic.Int64 // unix ns when the last producer stopped sending

	batches, batchRecords, batchBytes atomic.Int64
	bd                                atomic.Pointer[breakdown] // set by start
}

// OnBrokerE2E implements kgo.HookBrokerE2E: the Produce requests' parts
// (breakdown.go).
func (p *producerRun) OnBrokerE2E(m kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if b := p.bd.Load(); b != nil {
		b.OnBrokerE2E(m, key, e)
	}
}

// OnProduceBatchWritten implements kgo.HookProduceBatchWritten: the average
// batch is the write size the broker's WAL sees, used for the disk ratio.
func (p *producerRun) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	p.batches.Add(1)
	p.batchRecords.Add(int64(m.NumRecords))
	p.batchBytes.Add(int64(m.CompressedBytes))
}

func newProducerRun(cfg *config) (*producerRun, error) {
	p := &producerRun{cfg: cfg}
	comp, err := codec(cfg.compression)
	if err != nil {
		return nil, err
	}
	acks := kgo.AllISRAcks()
	switch cfg.acks {
	case "1":
		acks = kgo.LeaderAck()
	case "0":
		acks = kgo.NoAck()
	}
	opts := append(clientOpts(cfg),
		kgo.DefaultProduceTopic(cfg.topic),
		kgo.RequiredAcks(acks),
		kgo.ProducerLinger(cfg.linger),
		kgo.ProducerBatchMaxBytes(int32(min(int(cfg.batchBytes), 1<<30))),
		kgo.ProducerBatchCompression(comp),
		kgo.MaxBufferedRecords(cfg.maxBuffered),
		kgo.WithHooks(p),
	)
	if !cfg.idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
		if cfg.maxInflight > 0 {
			opts = append(opts, kgo.MaxProduceRequestsInflightPerBroker(cfg.maxInflight))
		}
	}
	for range cfg.producers {
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			p.close()
			return nil, err
		}
		p.clients = append(p.clients, cl)
	}
	// Values are cut at varying offsets from 1 MiB of random bytes, so
	// no two records are alike and compression does not flatter the
	// broker, while building a record stays a memcpy.
	p.payload = make([]byte, 1<<20+int(cfg.recordSize))
	_, _ = rand.Read(p.payload)
	return p, nil
}

// start fixes the schedule: sending begins now, measuring after warmup.
func (p *producerRun) start() {
	p.startAt = time.Now()
	p.begin = p.startAt.Add(p.cfg.warmup)
	p.rec = newRecorder(true, p.begin)
	p.bd.Store(newBreakdown(p.begin))
}

func (p *producerRun) close() {
	p.closeOnce.Do(func() {
		for _, cl := range p.clients {
			cl.Close()
		}
	})
}

// run sends until the duration or record budget is used up (or ctx is
// cancelled), then waits up to --drain-timeout for outstanding acks.
func (p *producerRun) run(ctx context.Context, out io.Writer) {
	// Records get a context that survives ctx: on Ctrl-C sending stops but
	// what is buffered is still flushed and counted (kgo fails buffered
	// records whose Produce context is cancelled). abort fails them if
	// the drain takes too long, also unblocking a Produce call that waits
	// for buffer space from a broker that no longer answers.
	recCtx, abort := context.WithCancel(context.WithoutCancel(ctx))
	defer abort()
	stopAbort := context.AfterFunc(ctx, func() { time.AfterFunc(p.cfg.drainTimeout, abort) })
	defer stopAbort()
	var wg sync.WaitGroup
	for i, cl := range p.clients {
		wg.Go(func() { p.sendLoop(ctx, recCtx, cl, i) })
	}
	wg.Wait()

	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.drainTimeout)
	defer cancel()
	var timedOut atomic.Bool
	for _, cl := range p.clients {
		wg.Go(func() {
			if err := cl.Flush(flushCtx); err != nil {
				timedOut.Store(true)
			}
		})
	}
	wg.Wait()
	if timedOut.Load() {
		fmt.Fprintf(out, "warning: records still unacknowledged after --drain-timeout %v; failing them\n", p.cfg.drainTimeout)
		abort()
		p.close() // fails whatever is still buffered or in flight
	}
}

// sendLoop is one producer. With a rate it follows a fixed schedule (open
// loop): record k is due at startAt + k/rate whether or not earlier sends
// were slow, late records go out back to back, and latency is measured from
// the due time, so a stalled broker shows up as latency instead of as a
// silently lower send rate (coordinated omission).
func (p *producerRun) sendLoop(ctx, recCtx context.Context, cl *kgo.Client, idx int) {
	cfg := p.cfg
	perProducer := cfg.rate / float64(cfg.producers)
	size := int(cfg.recordSize)
	off := (idx * 7919) % (len(p.payload) - size + 1)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer func() {
		now := time.Now().UnixNano()
		for {
			old := p.sendEnd.Load()
			if old >= now || p.sendEnd.CompareAndSwap(old, now) {
				return
			}
		}
	}()
	for k := int64(0); ; k++ {
		if ctx.Err() != nil {
			return
		}
		var due time.Time
		if perProducer > 0 {
			due = p.startAt.Add(time.Duration(float64(k) / perProducer * float64(time.Second)))
			if cfg.duration > 0 && due.Sub(p.begin) >= cfg.duration {
				return // checked before sleeping: at low rates the wait is long
			}
			if wait := time.Until(due); wait > 0 {
				timer.Reset(wait)
				select {
				case <-ctx.Done():
					return
				case <-timer.C:
				}
			}
		} else {
			due = time.Now()
		}
		measured := !due.Before(p.begin)
		if measured {
			if cfg.duration > 0 && due.Sub(p.begin) >= cfg.duration {
				return
			}
			if cfg.records > 0 && p.claimed.Add(1) > cfg.records {
				return
			}
			p.sent.Add(1)
		}
		r := &kgo.Record{Value: make([]byte, size)}
		copy(r.Value, p.payload[off:off+size])
		off = (off + 4099) % (len(p.payload) - size + 1)
		stampSendTime(r, due)
		cl.Produce(recCtx, r, func(r *kgo.Record, err error) {
			if !measured {
				return
			}
			if err != nil {
				p.rec.fail()
				return
			}
			now := time.Now()
			p.rec.observe(len(r.Value), now.Sub(due), now)
		})
	}
}

// stampSendTime puts t (unix ns, big endian) in the first 8 bytes of the
// value, or in a header when the value is shorter, for e2e latency.
func stampSendTime(r *kgo.Record, t time.Time) {
	if len(r.Value) >= 8 {
		binary.BigEndian.PutUint64(r.Value, uint64(t.UnixNano()))
		return
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(t.UnixNano()))
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: tsHeader, Value: b[:]})
}

// sendTime reads what stampSendTime wrote.
func sendTime(r *kgo.Record) (time.Time, bool) {
	for _, h := range r.Headers {
		if h.Key == tsHeader && len(h.Value) == 8 {
			return time.Unix(0, int64(binary.BigEndian.Uint64(h.Value))), true
		}
	}
	if len(r.Value) >= 8 {
		return time.Unix(0, int64(binary.BigEndian.Uint64(r.Value))), true
	}
	return time.Time{}, false
}

func (p *producerRun) result(series []Interval) *ProduceResult {
	t := p.rec.totals()
	// Measured time runs from the end of warmup to the last ack (or to
	// the end of sending if nothing was acked), so that throughput counts
	// the time the broker took for the tail of the run.
	end := time.Unix(0, p.sendEnd.Load())
	if t.Last.After(end) {
		end = t.Last
	}
	secs := max(end.Sub(p.begin).Seconds(), 0)
	r := &ProduceResult{
		RecordsSent:   p.sent.Load(),
		RecordsAcked:  t.Records,
		RecordsFailed: t.Failed,
		Bytes:         t.Bytes,
		DurationS:     secs,
		RecordsPerSec: rate(t.Records, secs),
		MBPerSec:      rate(t.Bytes, secs) / 1e6,
		TargetRate:    p.cfg.rate,
		Latency:       t.Latency,
		Distribution:  t.Distribution,
		Intervals:     series,
	}
	if r.Intervals == nil {
		r.Intervals = []Interval{}
	}
	if b := p.bd.Load(); b != nil {
		r.Requests = b.result()
	}
	if b := p.batches.Load(); b > 0 {
		r.AvgBatchRecords = float64(p.batchRecords.Load()) / float64(b)
		r.AvgBatchBytes = float64(p.batchBytes.Load()) / float64(b)
	}
	return r
}

// compareDisk measures the WAL directory at the record size and at the
// average batch size and relates produce throughput to both.
func compareDisk(ctx context.Context, cfg *config, pr *ProduceResult) (*DiskReport, error) {
	rep := &DiskReport{Dir: cfg.walDir}
	sizes := []struct {
		basis string
		size  int
	}{{"record", int(cfg.recordSize)}}
	if b := int(pr.AvgBatchBytes + 0.5); b > int(cfg.recordSize) {
		sizes = append(sizes, struct {
			basis string
			size  int
		}{"batch", b})
	}
	var errs []error
	for _, s := range sizes {
		d, err := DiskLimit(ctx, cfg.walDir, s.size, cfg.walDuration)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rep.Results = append(rep.Results, d)
		ratio := 0.0
		if d.MBPerSec > 0 {
			ratio = pr.MBPerSec / d.MBPerSec
		}
		rep.Ratios = append(rep.Ratios, DiskRatio{Basis: s.basis, WriteSize: s.size, LimitMBPerSec: d.MBPerSec, Ratio: ratio})
	}
	return rep, errors.Join(errs...)
}
