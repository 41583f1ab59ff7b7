package group

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkGroupLoad measures what a coordinator taking over an offsets partition spends
// in decoding and replaying its records (the read from the WAL or objects comes on top:
// the bytes are reported). Two logs:
//
//   - commits: 100,000 commits of 50 offsets by one group, an uncompacted history
//     (before compaction, every commit ever made was replayed);
//
//   - groups: 10,000 groups, each one Full record (3 members with their assignments and
//     50 offsets): what compaction leaves.
//
//     go test -run XXX -bench GroupLoad -benchtime 3x ./broker/group/
func BenchmarkGroupLoad(b *testing.B) {
	now := time.Now()
	offsets := func(n int, base int64) []Offset {
		out := make([]Offset, n)
		for i := range out {
			out[i] = Offset{Topic: "orders", Partition: int32(i), Offset: base + int64(i), LeaderEpoch: 3, CommitTime: now, TopicID: "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9"}
		}
		return out
	}
	type rec struct {
		group string
		value []byte
	}
	encode := func(r Record) []byte {
		v, err := EncodeRecord(r)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	commits := func() []rec {
		out := make([]rec, 100_000)
		for i := range out {
			out[i] = rec{"g", encode(Record{Offsets: offsets(50, int64(i))})}
		}
		return out
	}
	groups := func() []rec {
		out := make([]rec, 10_000)
		for i := range out {
			m := &Meta{Generation: 7, ProtocolType: "consumer", Protocol: "cooperative-sticky", Leader: "m0", Time: now}
			for j := 0; j < 3; j++ {
				m.Members = append(m.Members, MemberMeta{ID: fmt.Sprintf("m%d", j), ClientID: "svc", ClientHost: "/10.0.0.1",
					SessionTimeout: 45 * time.Second, RebalanceTimeout: time.Minute,
					Protocols:  []ProtocolMeta{{Name: "cooperative-sticky", Metadata: make([]byte, 64)}},
					Assignment: make([]byte, 120)})
			}
			out[i] = rec{fmt.Sprintf("group-%d", i), encode(Record{Full: true, Meta: m, Offsets: offsets(50, 1000)})}
		}
		return out
	}
	for _, c := range []struct {
		name string
		log  func() []rec
	}{{"commits-100k", commits}, {"groups-10k", groups}} {
		b.Run(c.name, func(b *testing.B) {
			log := c.log()
			var bytes int64
			for _, r := range log {
				bytes += int64(len(r.value))
			}
			b.SetBytes(bytes)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				co := New(DefaultConfig(), nil, nil)
				st, err := co.Load(all, func(apply func(string, Record)) error {
					for _, r := range log {
						d, err := DecodeRecord(r.value)
						if err != nil {
							return err
						}
						apply(r.group, d)
					}
					return nil
				})
				if err != nil || st.Records != len(log) {
					b.Fatal(st, err)
				}
				co.Close()
			}
			b.ReportMetric(float64(bytes)/(1<<20), "MiB/log")
		})
	}
}
