package cluster

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker"
	"github.com/weir-io/weir/internal/kafkatest"
)

// BenchmarkFetchSessions measures the broker's CPU per fetch of a consumer of many idle
// partitions (issue 26 item 4), with and without an incremental fetch session (KIP-227),
// on one in-process broker (1 controller). The partitions each hold one record and the
// fetcher is at their end, so no fetch returns records: what is measured is the cost of
// a fetch itself. sessionless: every fetch (v13, session 0, epoch -1) names all
// partitions and is answered about all of them. incremental: one full fetch creates a
// session, then every fetch names none and is answered about none (the benchmark checks
// the answer is empty), while the broker still reads every partition of the session.
//
// The fetcher is a raw connection (requests encoded once, answers not decoded beyond
// their error code and session id), so the client's own CPU is a write and a read. CPU
// is the process's getrusage (user+system) over the loop, minus the idle rate of the
// cluster's background (heartbeats, leases) measured for 2 s before; reported per fetch
// and per partition, with the bytes on the wire per fetch:
//
//	go test -run '^$' -bench BenchmarkFetchSessions -benchtime 5000x ./cluster
//
// Env: WEIR_FETCH_PARTITIONS (default 1000).
func BenchmarkFetchSessions(b *testing.B) {
	n := 1000
	if s := envStr("WEIR_FETCH_PARTITIONS", ""); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	c, err := Start(Config{Dir: b.TempDir(), Controllers: 1, Brokers: 1, NoGossip: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		BrokerConfig: func(bc *broker.Config) { bc.OffsetsTopicPartitions = 1 }})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	topic := prepareIdleTopic(b, ctx, c, n)

	idle := idleCPURate(2 * time.Second)
	for _, mode := range []string{"sessionless", "incremental"} {
		b.Run(mode, func(b *testing.B) {
			f := dialFetcher(b, c.KafkaAddrs()[0], topic, n)
			epoch, id := int32(finalEpochReq), int32(0)
			if mode == "incremental" {
				id, epoch = f.fetch(b, 0, 0, true), 1
			}
			b.ResetTimer()
			cpu0, _ := coldCPU()
			start := time.Now()
			for range b.N {
				if mode == "incremental" {
					f.fetch(b, id, epoch, false)
					epoch++
				} else {
					f.fetch(b, 0, finalEpochReq, true)
				}
			}
			cpu1, _ := coldCPU()
			wall := time.Since(start)
			b.StopTimer()
			busy := (cpu1 - cpu0) - time.Duration(float64(wall)*idle)
			perFetch := float64(busy.Nanoseconds()) / float64(b.N)
			b.ReportMetric(perFetch/1e3, "cpu-µs/fetch")
			b.ReportMetric(perFetch/float64(n), "cpu-ns/partition")
			b.ReportMetric(float64(f.reqBytes+f.respBytes)/float64(f.fetches), "wire-B/fetch")
		})
	}
}

// finalEpochReq is a sessionless fetch's epoch.
const finalEpochReq = -1

// prepareIdleTopic creates a topic of n partitions on c, puts one record in each and
// returns its metadata once led.
func prepareIdleTopic(b *testing.B, ctx context.Context, c *Cluster, n int) kmsg.MetadataResponseTopic {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KafkaAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "idle", int32(n), -1
	req.Topics = append(req.Topics, rt)
	if _, err := req.RequestWith(ctx, cl); err != nil {
		b.Fatal(err)
	}
	var rs []*kgo.Record
	for p := range n {
		rs = append(rs, &kgo.Record{Topic: "idle", Partition: int32(p), Value: []byte("x")})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("idle")
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics) != 1 || len(mresp.Topics[0].Partitions) != n {
		b.Fatalf("metadata: %v %+v", err, mresp)
	}
	return mresp.Topics[0]
}

// idleCPURate is the process's CPU seconds per second over d of doing nothing.
func idleCPURate(d time.Duration) float64 {
	cpu0, _ := coldCPU()
	time.Sleep(d) // on purpose: the background's CPU over a known idle time
	cpu1, _ := coldCPU()
	return float64(cpu1-cpu0) / float64(d)
}

// rawFetcher sends hand-encoded Fetch v13 requests on one connection.
type rawFetcher struct {
	nc                           net.Conn
	full                         []byte // the full fetch's frame; corr and epoch patched
	corr                         int32
	fetches, reqBytes, respBytes int64
	topic                        kmsg.MetadataResponseTopic
}

func dialFetcher(b *testing.B, addr string, topic kmsg.MetadataResponseTopic, n int) *rawFetcher {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	f := &rawFetcher{nc: nc, topic: topic}
	req := f.request(0, 0)
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = topic.TopicID
	for p := range n {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = int32(p), 1, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	f.full = frame(req)
	// The session fields' place in the frame (fetch patches them): check it once.
	binary.BigEndian.PutUint32(f.full[32:], 7)
	binary.BigEndian.PutUint32(f.full[36:], 9)
	check := kmsg.NewPtrFetchRequest()
	check.Version = 13
	if err := check.ReadFrom(f.full[15:]); err != nil || check.SessionID != 7 || check.SessionEpoch != 9 || len(check.Topics[0].Partitions) != n {
		b.Fatalf("patched fetch frame: %v, session %d epoch %d", err, check.SessionID, check.SessionEpoch)
	}
	return f
}

func (f *rawFetcher) request(id, epoch int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.SessionID, req.SessionEpoch = 13, -1, id, epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 0, 50<<20
	return req
}

// frame encodes req as a request frame (correlation ID 0, no client ID).
func frame(req kmsg.Request) []byte {
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, 0)
	b = kbin.AppendNullableString(b, nil)
	b = append(b, 0) // header tags (v12+ are flexible)
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// fetch sends one fetch: the full one (all partitions) with session (id, epoch), or an
// incremental one naming nothing, which must be answered with no partition. It returns
// the answer's session id.
func (f *rawFetcher) fetch(b *testing.B, id, epoch int32, full bool) int32 {
	f.corr++
	var msg []byte
	if full {
		msg = f.full
		// The session fields follow the header (15 bytes) and ReplicaID, MaxWait,
		// MinBytes, MaxBytes, IsolationLevel (17 bytes).
		binary.BigEndian.PutUint32(msg[32:], uint32(id))
		binary.BigEndian.PutUint32(msg[36:], uint32(epoch))
	} else {
		msg = frame(f.request(id, epoch))
	}
	binary.BigEndian.PutUint32(msg[8:], uint32(f.corr))
	if _, err := f.nc.Write(msg); err != nil {
		b.Fatal(err)
	}
	f.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	corr, body, err := kafkatest.ReadResponse(f.nc)
	if err != nil || corr != f.corr || len(body) < 12 {
		b.Fatalf("fetch %d: corr %d, %d bytes, %v", f.corr, corr, len(body), err)
	}
	// Body: header tags (1 byte), throttle (4), error code (2), session id (4), then the
	// topics' compact array length (1 = none).
	if code := int16(binary.BigEndian.Uint16(body[5:])); code != 0 {
		b.Fatalf("fetch %d (session %d, epoch %d): error %d", f.corr, id, epoch, code)
	}
	if !full && body[11] != 1 {
		b.Fatalf("incremental fetch %d of idle partitions answered partitions (%d bytes)", f.corr, len(body))
	}
	f.fetches++
	f.reqBytes += int64(len(msg))
	f.respBytes += int64(len(body)) + 8
	if f.corr == 1 && full {
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = 13
		if err := resp.ReadFrom(body[1:]); err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != len(f.topic.Partitions) {
			b.Fatalf("first full fetch: %v, %+v", err, resp.Topics)
		}
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 1 {
				b.Fatalf("first full fetch: partition %+v, want no error, no records, high watermark 1", p)
			}
		}
	}
	return int32(binary.BigEndian.Uint32(body[7:]))
}
