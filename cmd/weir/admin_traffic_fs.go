package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"text/tabwriter"
)

// The WAL file system's part of `weir admin traffic`: what each broker read from and
// wrote to the shared file system (weir_broker_wal_fs_bytes_total), beside the produced
// record bytes and the file system's provisioned throughput. FSx for ONTAP Multi-AZ
// bills no transfer between zones, but its throughput capacity is provisioned and every
// broker shares it: writes (appends, a zone proxy's included, and segment zero-fill)
// and reads (uploads, read replicas, loads, recoveries) alike.

const (
	fsMetric   = "weir_broker_wal_fs_bytes_total"
	heldMetric = "weir_tier_wal_held_bytes" // a gauge: the WAL's bytes on disk
)

type fsSample struct {
	broker, op, wal string
	value           float64
}

// fsRow is one broker's file-system bytes over the interval (or since it started).
type fsRow struct {
	Broker     string  `json:"broker"`
	WriteBytes float64 `json:"write_bytes"`
	ReadOwn    float64 `json:"read_own_bytes"`
	ReadOther  float64 `json:"read_other_bytes"`
}

// fsReport is the file system's load.
type fsReport struct {
	Brokers    []fsRow `json:"brokers"`
	WriteBytes float64 `json:"write_bytes"`
	ReadBytes  float64 `json:"read_bytes"`
	// Per produced record byte (0 without records).
	WritePerProduced float64 `json:"write_per_produced"`
	ReadPerProduced  float64 `json:"read_per_produced"`
	// With an interval: MB/s (decimal, as file systems are sold) and, with
	// --fs-throughput-mbps, the share of the provisioned throughput.
	MBps            float64 `json:"mbps,omitempty"`
	ProvisionedMBps float64 `json:"provisioned_mbps,omitempty"`
	Share           float64 `json:"share_of_provisioned,omitempty"`
	// WALHeldBytes: the brokers' WAL bytes on disk at the second scrape; WALHeldSeconds:
	// as seconds of the interval's produce rate (the file system's capacity need).
	WALHeldBytes   float64 `json:"wal_held_bytes"`
	WALHeldSeconds float64 `json:"wal_held_seconds,omitempty"`
}

// scrapeFS reads weir_broker_wal_fs_bytes_total from every endpoint, keyed by endpoint
// and label set; a series's broker is its node label (weir dev serves every broker's
// /metrics on one endpoint), else its endpoint.
func scrapeFS(ctx context.Context, cl *http.Client, endpoints []string) (map[string]fsSample, error) {
	out := map[string]fsSample{}
	for _, ep := range endpoints {
		mfs, err := scrapeFamilies(ctx, cl, ep)
		if err != nil {
			return nil, fmt.Errorf("traffic: %w", err)
		}
		for _, m := range mfs[heldMetric].GetMetric() {
			s := fsSample{broker: ep, op: "held", value: m.GetGauge().GetValue()}
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "node" {
					s.broker = lp.GetValue()
				}
			}
			out[ep+"|"+s.broker+"|held"] = s
		}
		for _, m := range mfs[fsMetric].GetMetric() {
			s := fsSample{broker: ep, value: m.GetCounter().GetValue()}
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "node":
					s.broker = lp.GetValue()
				case "op":
					s.op = lp.GetValue()
				case "wal":
					s.wal = lp.GetValue()
				}
			}
			out[ep+"|"+s.broker+"|"+s.op+"|"+s.wal] = s
		}
	}
	return out, nil
}

// computeFS turns two scrapes (first nil: totals) into the file system's report; nil
// if no broker exports the counter.
func computeFS(first, second map[string]fsSample, intervalSecs, produced, provisionedMBps float64) *fsReport {
	if len(second) == 0 {
		return nil
	}
	rows := map[string]*fsRow{}
	rep := &fsReport{ProvisionedMBps: provisionedMBps}
	for id, s := range second {
		v := s.value
		if s.op == "held" {
			rep.WALHeldBytes += v // a gauge: its value now
			continue
		}
		if f, ok := first[id]; ok && f.value <= v {
			v -= f.value // a series that went down (a restart) counts its second value
		}
		r := rows[s.broker]
		if r == nil {
			r = &fsRow{Broker: s.broker}
			rows[s.broker] = r
		}
		switch {
		case s.op == "write":
			r.WriteBytes += v
			rep.WriteBytes += v
		case s.wal == "own":
			r.ReadOwn += v
			rep.ReadBytes += v
		default:
			r.ReadOther += v
			rep.ReadBytes += v
		}
	}
	for _, r := range rows {
		rep.Brokers = append(rep.Brokers, *r)
	}
	sort.Slice(rep.Brokers, func(i, j int) bool { return rep.Brokers[i].Broker < rep.Brokers[j].Broker })
	if produced > 0 {
		rep.WritePerProduced, rep.ReadPerProduced = rep.WriteBytes/produced, rep.ReadBytes/produced
	}
	if intervalSecs > 0 {
		if produced > 0 {
			rep.WALHeldSeconds = rep.WALHeldBytes / (produced / intervalSecs)
		}
		rep.MBps = (rep.WriteBytes + rep.ReadBytes) / intervalSecs / 1e6
		if provisionedMBps > 0 {
			rep.Share = rep.MBps / provisionedMBps
		}
	}
	return rep
}

func printFS(out io.Writer, fs *fsReport) {
	if fs == nil {
		return
	}
	fmt.Fprintf(out, "\nWAL file system (every broker's reads and writes, its own included; no cross-zone bill on FSx Multi-AZ, but its throughput is shared):\n")
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "BROKER\tWRITTEN\tREAD OWN WAL\tREAD OTHERS' WALS\t")
	for _, r := range fs.Brokers {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t\n", r.Broker, humanBytes(r.WriteBytes), humanBytes(r.ReadOwn), humanBytes(r.ReadOther))
	}
	w.Flush()
	fmt.Fprintf(out, "total: written %s, read %s", humanBytes(fs.WriteBytes), humanBytes(fs.ReadBytes))
	if fs.WritePerProduced > 0 || fs.ReadPerProduced > 0 {
		fmt.Fprintf(out, " (%.2f× and %.2f× the produced record bytes)", fs.WritePerProduced, fs.ReadPerProduced)
	}
	fmt.Fprintln(out)
	if fs.MBps > 0 {
		fmt.Fprintf(out, "rate: %.2f MB/s", fs.MBps)
		if fs.ProvisionedMBps > 0 {
			fmt.Fprintf(out, ", %.1f%% of the %.0f MB/s provisioned (--fs-throughput-mbps)", 100*fs.Share, fs.ProvisionedMBps)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "WAL held: %s on disk", humanBytes(fs.WALHeldBytes))
	if fs.WALHeldSeconds > 0 {
		fmt.Fprintf(out, ", %.1f s of the produce rate", fs.WALHeldSeconds)
	}
	fmt.Fprintln(out)
}
