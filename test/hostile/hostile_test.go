package hostile

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/internal/testutil"
)

// The attack and the bound. Budget: --queued-max-request-bytes (small requests have
// another eighth of it). What the broker holds live stays under the budget plus ~60 MiB
// (runtime, this test's few MiB of tail cache, ~1,000 connections' goroutines and read
// buffers, fetch answers); the Go collector (GOGC=100) lets the heap grow to about twice
// what is live before it collects, so the RSS bound is twice the budget plus 250 MiB.
// Measured on a 2-core VM (docs/SECURITY.md, "Limits and hostile clients"): VmHWM 320-350 MiB;
// without the budget (--queued-max-request-bytes 0) the same attack reaches 870 MiB.
const (
	budget     = 100 << 20 // the default, at least --max-request-bytes (100 MiB)
	fetchMax   = 1 << 20
	perIP      = 700
	rssBound   = 2*budget + 250<<20
	announcers = 500 // 100 MiB announced, nothing sent
	slowSmall  = 20  // a Metadata request, 1 byte every 100 ms
	slowBig    = 20  // 100 MiB announced, then 1 byte every 100 ms
	extraConns = 300 // over the per-address limit with the ones above
	floods     = 8   // pipelined ApiVersions/Metadata; half never read their answers
	fuzzers    = 2   // connections of random frames, one after another
	stallers   = 30  // 16 MiB requests sent up to 12 MiB, then nothing: 360 MiB wanted
	attackFor  = 12 * time.Second
	preload    = 4 << 20 // bytes in topic "big", more than a clamped fetch may carry
)

// Source addresses (all loopback): the attackers' own, so the per-address limit they
// hit is theirs, and the well-behaved client's.
const (
	attackerIP = "127.0.0.1"
	goodIP     = "127.0.0.2"
	fuzzIP     = "127.0.0.3"
	floodIP    = "127.0.0.4"
	stallIP    = "127.0.0.5"
)

func dialer(ip string) *net.Dialer {
	return &net.Dialer{Timeout: 20 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
}

// frame encodes req as a request frame (non-flexible versions only: header v1).
func frame(corr int32, req kmsg.Request) []byte {
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = kbin.AppendNullableString(b, nil)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// readFrame reads one response frame (size-prefixed); it returns the body after the
// correlation ID.
func readFrame(nc net.Conn, maxSize int) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > maxSize {
		return nil, fmt.Errorf("response frame of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(nc, body); err != nil {
		return nil, err
	}
	return body[4:], nil
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(math.Ceil(p*float64(len(s))))-1]
}

func TestHostileClientsLeaveTheBrokerUsable(t *testing.T) {
	p := startBroker(t, "--queued-max-request-bytes", strconv.Itoa(budget), "--fetch-max-bytes", strconv.Itoa(fetchMax),
		"--max-connections-per-ip", strconv.Itoa(perIP), "--request-budget-wait", "2s", "--log-level", "info")
	t.Logf("broker pid %d on %s", p.cmd.Process.Pid, p.addr)

	// The well-behaved client: a producer waiting for each ack, and a consumer.
	gd := dialer(goodIP)
	prod, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.Dialer(gd.DialContext), kgo.DefaultProduceTopic("good"),
		kgo.ProducerLinger(0), kgo.RequestTimeoutOverhead(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if _, err := kadm.NewClient(prod).CreateTopic(ctxT(t, 30*time.Second), 1, 1, nil, "good"); err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(prod).CreateTopic(ctxT(t, 30*time.Second), 1, 1, nil, "big"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for n := 0; n < preload; n += 10 << 10 {
		val := make([]byte, 10<<10)
		for i := range val {
			val[i] = byte(rand.Uint32()) // incompressible: the topic really holds preload bytes
		}
		recs = append(recs, &kgo.Record{Topic: "big", Value: val})
	}
	if err := prod.ProduceSync(ctxT(t, 60*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var acked []string
	produce := func(ctx context.Context, until time.Time) []time.Duration {
		var lat []time.Duration
		for time.Now().Before(until) && ctx.Err() == nil {
			v := fmt.Sprintf("good-%06d", len(acked))
			start := time.Now()
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Errorf("well-behaved produce failed: %v", err)
				return lat
			}
			lat = append(lat, time.Since(start))
			acked = append(acked, v)
			time.Sleep(5 * time.Millisecond) // on purpose: the well-behaved producer's pace
		}
		return lat
	}
	before := produce(ctxT(t, 30*time.Second), time.Now().Add(2*time.Second))

	cons, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.Dialer(gd.DialContext), kgo.ConsumeTopics("good"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var readMu sync.Mutex
	read := map[string]int{}
	consCtx, stopCons := context.WithCancel(context.Background())
	consDone := make(chan struct{})
	go func() {
		defer close(consDone)
		for consCtx.Err() == nil {
			fs := cons.PollFetches(consCtx)
			fs.EachRecord(func(r *kgo.Record) {
				readMu.Lock()
				read[string(r.Value)]++
				readMu.Unlock()
			})
		}
	}()
	defer func() { stopCons(); <-consDone }()

	// Memory: VmHWM is the kernel's own peak; samples show the curve, and the Go heap
	// (from /metrics) what of it is live.
	var peakRSS, peakHeap, peakInFlight atomic.Int64
	memDone := make(chan struct{})
	memCtx, stopMem := context.WithCancel(context.Background())
	go func() {
		defer close(memDone)
		for i := 0; memCtx.Err() == nil; i++ {
			if rss, _, err := p.memory(); err == nil && rss > peakRSS.Load() {
				peakRSS.Store(rss)
			}
			if i%10 == 0 {
				if m, err := p.scrape(); err == nil {
					if h := int64(sum(m, "go_memstats_heap_alloc_bytes")); h > peakHeap.Load() {
						peakHeap.Store(h)
					}
					if b := int64(sum(m, "weir_broker_request_bytes_in_flight")); b > peakInFlight.Load() {
						peakInFlight.Store(b)
					}
				}
			}
			time.Sleep(50 * time.Millisecond) // on purpose: the sampler's pace
		}
	}()
	rssBefore, _, _ := p.memory()

	attack, stopAttack := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var conns struct {
		sync.Mutex
		list []net.Conn
	}
	keep := func(nc net.Conn) {
		conns.Lock()
		conns.list = append(conns.list, nc)
		conns.Unlock()
	}
	ad := dialer(attackerIP)
	announce := binary.BigEndian.AppendUint32(nil, 100<<20)

	// 1. Hundreds of connections announcing 100 MiB and sending nothing.
	for i := 0; i < announcers; i++ {
		nc, err := ad.Dial("tcp", p.addr)
		if err != nil {
			t.Fatalf("announcer %d: %v", i, err)
		}
		keep(nc)
		if _, err := nc.Write(announce); err != nil {
			t.Fatalf("announcer %d: %v", i, err)
		}
	}

	// 2. Slow writers: a whole Metadata request at 1 byte per 100 ms (each must be
	// answered), and 100 MiB requests at the same pace (never complete).
	var slowAnswered atomic.Int32
	var slowMu sync.Mutex
	var slowFailures []string // why a small slow writer got no answer, for the failure message
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(4)
	for i := 0; i < slowSmall+slowBig; i++ {
		nc, err := ad.Dial("tcp", p.addr)
		if err != nil {
			t.Fatalf("slow writer %d: %v", i, err)
		}
		msg := frame(1, meta)
		big := i >= slowSmall
		if big {
			keep(nc)
			msg = append(slices.Clone(announce), make([]byte, 1<<20)...)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !big {
				defer nc.Close() // once answered (or not): the end of the attack does not cut it short
			}
			began := time.Now()
			fail := func(what string, err error) {
				slowMu.Lock()
				slowFailures = append(slowFailures, fmt.Sprintf("%s after %v: %v", what, time.Since(began).Round(time.Millisecond), err))
				slowMu.Unlock()
			}
			for j := 0; j < len(msg) && (!big || attack.Err() == nil); j++ {
				if _, err := nc.Write(msg[j : j+1]); err != nil {
					if !big {
						fail(fmt.Sprintf("writing byte %d of %d", j, len(msg)), err)
					}
					return
				}
				// Paced by the clock, not by sleeps: on a loaded machine (CI, -race)
				// each 100 ms sleep of this goroutine took 0.5 s, the 19 bytes 10 s, and
				// the broker rightly closed the request at its read deadline. A writer
				// behind its schedule sends its next byte at once.
				if big {
					time.Sleep(100 * time.Millisecond) // never completes anyway
				} else if d := time.Until(began.Add(time.Duration(j+1) * 100 * time.Millisecond)); d > 0 {
					time.Sleep(d) // on purpose: the next byte's time
				}
			}
			if big {
				return
			}
			nc.SetReadDeadline(time.Now().Add(30 * time.Second))
			if _, err := readFrame(nc, 1<<20); err == nil {
				slowAnswered.Add(1)
			} else {
				fail("reading the answer", err)
			}
		}()
	}

	// 3. More connections from the attackers' address than --max-connections-per-ip.
	for i := 0; i < extraConns; i++ {
		nc, err := ad.Dial("tcp", p.addr)
		if err != nil {
			break // the listen queue may be full for a moment; enough have been refused
		}
		keep(nc)
	}

	// 4. A fetch asking for 2 GiB overall and per partition, again and again.
	var fetches, fetchMaxSeen atomic.Int64
	fetchErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		nc, err := dialer(floodIP).Dial("tcp", p.addr)
		if err != nil {
			fetchErr <- err
			return
		}
		defer nc.Close()
		req := fetch2GiB()
		for corr := int32(1); attack.Err() == nil; corr++ {
			nc.SetDeadline(time.Now().Add(20 * time.Second))
			if _, err := nc.Write(frame(corr, req)); err != nil {
				fetchErr <- err
				return
			}
			body, err := readFrame(nc, 64<<20)
			if err != nil {
				fetchErr <- err
				return
			}
			resp := kmsg.NewPtrFetchResponse()
			resp.SetVersion(11)
			if err := resp.ReadFrom(body); err != nil {
				fetchErr <- err
				return
			}
			n := 0
			for _, tp := range resp.Topics {
				for _, pp := range tp.Partitions {
					n += len(pp.RecordBatches)
				}
			}
			if int64(n) > fetchMaxSeen.Load() {
				fetchMaxSeen.Store(int64(n))
			}
			fetches.Add(1)
			time.Sleep(50 * time.Millisecond) // on purpose: the fetcher's pace
		}
	}()

	// 5. Request floods: pipelined ApiVersions and Metadata, as fast as the broker takes
	// them; half the connections never read an answer.
	var floodAnswers atomic.Int64
	for i := 0; i < floods; i++ {
		nc, err := dialer(floodIP).Dial("tcp", p.addr)
		if err != nil {
			t.Fatalf("flood %d: %v", i, err)
		}
		keep(nc)
		reads := i%2 == 0
		av := kmsg.NewPtrApiVersionsRequest()
		av.SetVersion(2)
		var batch []byte
		for j := int32(0); j < 100; j++ {
			if j%2 == 0 {
				batch = append(batch, frame(j, av)...)
			} else {
				batch = append(batch, frame(j, meta)...)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for attack.Err() == nil {
				nc.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
				if _, err := nc.Write(batch); err != nil && !isTimeout(err) {
					return
				}
			}
		}()
		if reads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for attack.Err() == nil {
					nc.SetReadDeadline(time.Now().Add(time.Second))
					if _, err := readFrame(nc, 1<<20); err != nil {
						if isTimeout(err) {
							continue
						}
						return
					}
					floodAnswers.Add(1)
				}
			}()
		}
	}

	// 6. Random frames: random sizes, random bodies, random keys and versions, flipped
	// bits in real requests; a new connection each time.
	var fuzzConns atomic.Int64
	seed := uint64(time.Now().UnixNano())
	t.Logf("fuzz seed %d", seed)
	for i := 0; i < fuzzers; i++ {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			fd := dialer(fuzzIP)
			for attack.Err() == nil {
				nc, err := fd.Dial("tcp", p.addr)
				if err != nil {
					time.Sleep(10 * time.Millisecond) // on purpose: a refused attacker's pace of redials
					continue
				}
				fuzzConns.Add(1)
				nc.SetDeadline(time.Now().Add(300 * time.Millisecond))
				nc.Write(randomFrame(rng))
				io.Copy(io.Discard, nc) // until closed or the deadline
				nc.Close()
			}
		}()
	}

	// 7. Requests that stop short: together they want more than the budget, each holds
	// part of it and waits for more; the broker must close them (--request-budget-wait)
	// rather than stall, and they come back again and again.
	var stalled atomic.Int64
	for i := 0; i < stallers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sd := dialer(stallIP)
			msg := append(binary.BigEndian.AppendUint32(nil, 16<<20), make([]byte, 12<<20)...)
			for attack.Err() == nil {
				nc, err := sd.Dial("tcp", p.addr)
				if err != nil {
					time.Sleep(10 * time.Millisecond) // on purpose: a refused attacker's pace of redials
					continue
				}
				go func() { <-attack.Done(); nc.Close() }()
				nc.Write(msg) // blocks while the broker waits for budget
				io.Copy(io.Discard, nc)
				stalled.Add(1)
				nc.Close()
			}
		}()
	}

	// 8. Fetches pipelined and never read: the broker holds one answer, not fifty.
	{
		nc, err := dialer(floodIP).Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		keep(nc)
		req := fetch2GiB()
		for corr := int32(1); corr <= 50; corr++ {
			if _, err := nc.Write(frame(corr, req)); err != nil {
				t.Fatal(err)
			}
		}
	}

	t.Logf("attack running: %d connections held open", len(conns.list))
	during := produce(ctxT(t, attackFor+30*time.Second), time.Now().Add(attackFor))
	// On a machine busy with other tests the fuzzers may have had few turns in the
	// attack's time: the attack goes on until they sent enough random frames for some to
	// be counted as bad (the check below).
	testutil.Eventually(t, 2*time.Minute, "20 fuzz connections", func() bool { return fuzzConns.Load() >= 20 })
	stopAttack()
	conns.Lock()
	for _, nc := range conns.list {
		nc.Close()
	}
	conns.Unlock()
	wg.Wait()
	stopMem()
	<-memDone
	_, hwm, err := p.memory() // the peak over the whole attack, its end included
	if err != nil {
		t.Fatalf("broker memory: %v (is it alive? %v)", err, p.alive())
	}

	if !p.alive() {
		t.Fatal("the broker died under attack")
	}
	t.Logf("well-behaved produce latency before the attack: n=%d p50=%v p99=%v; during: n=%d p50=%v p99=%v",
		len(before), percentile(before, .5), percentile(before, .99), len(during), percentile(during, .5), percentile(during, .99))
	t.Logf("broker memory: VmRSS before the attack %d MiB, peak sampled VmRSS %d MiB, VmHWM %d MiB (bound %d MiB); sampled peaks: Go heap allocated %d MiB, request bytes in flight %d MiB",
		rssBefore>>20, peakRSS.Load()>>20, hwm>>20, rssBound>>20, peakHeap.Load()>>20, peakInFlight.Load()>>20)
	t.Logf("attack: %d fetches of 2 GiB (largest answer %d KiB), %d flood answers read, %d fuzz connections, %d/%d slow writers answered, %d stalled requests closed",
		fetches.Load(), fetchMaxSeen.Load()>>10, floodAnswers.Load(), fuzzConns.Load(), slowAnswered.Load(), slowSmall, stalled.Load())

	if peak := max(hwm, peakRSS.Load()); peak > rssBound {
		t.Errorf("peak RSS %d MiB over the bound of %d MiB", peak>>20, rssBound>>20)
	}
	if len(during) == 0 {
		t.Error("no well-behaved produce completed during the attack")
	}
	select {
	case err := <-fetchErr:
		t.Errorf("2 GiB fetch: %v", err)
	default:
	}
	if fetches.Load() == 0 {
		t.Error("no 2 GiB fetch was answered")
	}
	// The first batch may exceed the limit (KIP-74); the preload's batches are < 1 MiB.
	if m := fetchMaxSeen.Load(); m == 0 || m > fetchMax+1<<20 {
		t.Errorf("a 2 GiB fetch got %d bytes of records; --fetch-max-bytes is %d", m, fetchMax)
	}
	if n := slowAnswered.Load(); n != slowSmall {
		slowMu.Lock()
		t.Errorf("%d of %d slow writers' requests were answered; the others: %v", n, slowSmall, slowFailures)
		slowMu.Unlock()
	}

	t.Logf("attack over; reading back")
	// Every acked record is read back, once the consumer catches up.
	testutil.EventuallyNoError(t, time.Minute, "every acked record read back", func() error {
		readMu.Lock()
		defer readMu.Unlock()
		missing := 0
		for _, v := range acked {
			if read[v] == 0 {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d not read yet", missing, len(acked))
		}
		return nil
	})

	// With the attackers gone, their budget comes back (what is left is the consumer's
	// long poll): nothing leaks.
	var m map[string]float64
	returned := time.Now()
	testutil.EventuallyNoError(t, time.Minute, "the attackers' request budget back", func() error {
		if m, err = p.scrape(); err != nil {
			t.Fatal(err)
		}
		if held := sum(m, "weir_broker_request_bytes_in_flight"); held >= 64<<10 {
			return fmt.Errorf("%v request bytes still held after the attack", held)
		}
		return nil
	})
	t.Logf("budget back within %v of the read-back", time.Since(returned).Round(time.Millisecond))
	if n := sum(m, "weir_broker_connections_refused_total"); n == 0 {
		t.Error("no connection was refused over --max-connections-per-ip")
	}
	if n := sum(m, "weir_broker_fetch_clamped_total"); n == 0 {
		t.Error("no fetch was counted as clamped")
	}
	if n := sum(m, "weir_broker_bad_frames_total"); n == 0 {
		t.Error("no bad frame was counted")
	}
	if n := sum(m, "weir_broker_handler_panics_total"); n != 0 {
		t.Errorf("%v handler panics", n)
	}
	t.Logf("metrics: refused %v, bad frames %v, fetch clamped %v, budget waits %v, budget timeouts %v, request bytes in flight now %v",
		sum(m, "weir_broker_connections_refused_total"), sum(m, "weir_broker_bad_frames_total"), sum(m, "weir_broker_fetch_clamped_total"),
		sum(m, "weir_broker_request_budget_waits_total"), sum(m, "weir_broker_request_budget_timeouts_total"), sum(m, "weir_broker_request_bytes_in_flight"))
}

// fetch2GiB asks for 2 GiB of topic "big" partition 0 from offset 0, overall and for the
// partition (v11: topic names).
func fetch2GiB() *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(11)
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = -1, 0, math.MaxInt32, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "big"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = math.MaxInt32, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// randomFrame is one of: a random size and random bytes; a valid size and a random
// body; a valid header of a random key and version and a random body; a real request
// with random bits flipped.
func randomFrame(rng *rand.Rand) []byte {
	rnd := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	switch rng.IntN(4) {
	case 0:
		return rnd(4 + rng.IntN(1024))
	case 1:
		n := 8 + rng.IntN(64<<10)
		return append(binary.BigEndian.AppendUint32(nil, uint32(n)), rnd(n)...)
	case 2:
		body := binary.BigEndian.AppendUint16(nil, uint16(rng.IntN(80)))
		body = binary.BigEndian.AppendUint16(body, uint16(rng.IntN(20)))
		body = binary.BigEndian.AppendUint32(body, rng.Uint32())
		body = binary.BigEndian.AppendUint16(body, 0xffff)
		body = append(body, rnd(rng.IntN(512))...)
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	default:
		reqs := []kmsg.Request{kmsg.NewPtrMetadataRequest(), kmsg.NewPtrProduceRequest(), kmsg.NewPtrFetchRequest(), kmsg.NewPtrListOffsetsRequest(), kmsg.NewPtrJoinGroupRequest()}
		req := reqs[rng.IntN(len(reqs))]
		req.SetVersion(4)
		f := frame(rng.Int32(), req)
		for i := 0; i < 1+rng.IntN(4); i++ {
			j := 4 + rng.IntN(len(f)-4) // keep the size right
			f[j] ^= byte(1 << rng.IntN(8))
		}
		return f
	}
}
