package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weir-io/weir/bench"
	"github.com/weir-io/weir/internal/cost"
)

// `weir admin cost`: a monthly bill by line for a workload on Weir, beside Apache Kafka
// (RF 3, with and without rack-aware consumers) and AutoMQ (S3 WAL, FSx WAL). The
// models and their numbers live in internal/cost; this is the command line.

const costHelp = `Usage: weir admin cost [flags]

Prices a workload for a month on Weir (brokers in every zone on one FSx for ONTAP Multi-AZ
WAL, objects in S3), on Apache Kafka (replication factor 3 on EBS, consumers without and
with rack awareness) and on AutoMQ (WAL on S3, WAL on FSx), line by line: instances,
cross-zone network (billed instance to instance), S3 storage, PUTs and GETs, FSx
throughput and SSD capacity. Each model's assumptions are printed under its bill, and
for the systems with a WAL file system its load beside what is provisioned.

The workload comes from the flags (--produce, --consume, --retention, --zones) or, with
--metrics, from a running cluster: its brokers' /metrics are scraped twice, --interval
apart, for the record bytes clients produced and consumed and the share of bytes that
crossed zones (the counters weir admin traffic reads), which replace --produce,
--consume and the table's weir_cross_zone_fraction.

Prices and the models' parameters come from a table: AWS us-east-1 list prices and the
figures Weir measured by default (--print-table prints it as JSON). --table FILE reads
a JSON file over the defaults: name only what differs, e.g.
  {"prices": {"ebs_per_gib_month": 0.09, "hours_per_month": 720}}
Rates are MiB/s, data GiB (AWS's "GB" is 2^30 bytes), money USD. docs/COST.md has the
worked example and what each assumption means.

`

type costOptions struct {
	work      cost.Workload
	table     cost.Table
	endpoints []string
	interval  time.Duration
	json      bool
}

func runAdminCost(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("weir admin cost", flag.ContinueOnError)
	o := costOptions{work: cost.Workload{Zones: 3}, table: cost.DefaultTable()}
	fs.Float64Var(&o.work.ProduceMiBps, "produce", 100, "MiB/s produced (record bytes, before replication)")
	consume := fs.Float64("consume", -1, "MiB/s consumed by every group together (default: as much as --produce)")
	fs.DurationVar(&o.work.Retention, "retention", 7*24*time.Hour, "how long records are kept (Kafka's retention.ms; 168h is its default)")
	fs.IntVar(&o.work.Zones, "zones", 3, "availability zones the cluster spans")
	tableFile := fs.String("table", "", "JSON file of prices and assumptions over the defaults (see --print-table)")
	printTable := fs.Bool("print-table", false, "print the table in use as JSON and exit")
	metrics := fs.String("metrics", "", "comma-separated /metrics addresses of every broker: take the workload's rates and cross-zone share from the running cluster")
	fs.DurationVar(&o.interval, "interval", 30*time.Second, "with --metrics: time between the two scrapes")
	fs.BoolVar(&o.json, "json", false, "print JSON")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), costHelp)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("cost: unexpected argument %q", fs.Arg(0))
	}
	o.work.ConsumeMiBps = o.work.ProduceMiBps
	if *consume >= 0 {
		o.work.ConsumeMiBps = *consume
	}
	if *tableFile != "" {
		f, err := os.Open(*tableFile)
		if err != nil {
			return fmt.Errorf("cost: %w", err)
		}
		o.table, err = cost.ReadTable(f, o.table)
		f.Close()
		if err != nil {
			return fmt.Errorf("%w (in %s)", err, *tableFile)
		}
	}
	if *printTable {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(o.table)
	}
	if o.endpoints = metricsURLs(*metrics); len(o.endpoints) > 0 {
		if err := o.fromCluster(ctx); err != nil {
			return err
		}
	}
	bills, err := cost.Compare(o.work, o.table)
	if err != nil {
		return err
	}
	if o.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Workload cost.Workload `json:"workload"`
			Table    cost.Table    `json:"table"`
			Bills    []cost.Bill   `json:"bills"`
		}{o.work, o.table, bills})
	}
	printBills(out, o.work, o.table, bills)
	return nil
}

// fromCluster replaces the workload's rates and Weir's cross-zone share with what the
// cluster's brokers counted over the interval.
func (o *costOptions) fromCluster(ctx context.Context) error {
	if o.interval <= 0 {
		return errors.New("cost: --interval must be > 0 with --metrics (rates need two scrapes)")
	}
	cl := &http.Client{Timeout: 10 * time.Second}
	first, err := scrapeTraffic(ctx, cl, o.endpoints)
	if err != nil {
		return fmt.Errorf("cost: %w", err)
	}
	select {
	case <-time.After(o.interval):
	case <-ctx.Done():
		return ctx.Err()
	}
	second, err := scrapeTraffic(ctx, cl, o.endpoints)
	if err != nil {
		return fmt.Errorf("cost: %w", err)
	}
	rep := computeTraffic(first, second, o.interval, 0)
	if rep.ProducedBytes+rep.ConsumedBytes == 0 {
		return fmt.Errorf("cost: no record bytes produced or consumed at %s in %v", strings.Join(o.endpoints, ", "), o.interval)
	}
	secs := o.interval.Seconds()
	o.work.ProduceMiBps = rep.ProducedBytes / secs / (1 << 20)
	o.work.ConsumeMiBps = rep.ConsumedBytes / secs / (1 << 20)
	o.table.Assumptions.WeirCrossZoneFraction = rep.CrossShare
	return nil
}

func printBills(out io.Writer, w cost.Workload, t cost.Table, bills []cost.Bill) {
	fmt.Fprintf(out, "Workload: produce %.1f MiB/s, consume %.1f MiB/s, retention %v, %d zones. Prices: %s, a month of %.0f hours.\n\n",
		w.ProduceMiBps, w.ConsumeMiBps, w.Retention, w.Zones, t.Prices.Region, t.Prices.HoursPerMonth)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SYSTEM\tMONTHLY USD\tCROSS-ZONE USD\tVS WEIR")
	weir := bills[0].Total
	for _, b := range bills {
		var network float64
		for _, l := range b.Lines {
			if l.Network {
				network += l.USD
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f×\n", b.System, usd(b.Total), usd(network), b.Total/weir)
	}
	tw.Flush()
	for _, b := range bills {
		fmt.Fprintf(out, "\n%s: %s a month\n", b.System, usd(b.Total))
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		for _, l := range b.Lines {
			fmt.Fprintf(tw, "  %s\t%s %s\t%s\n", l.Item, qty(l.Quantity), l.Unit, usd(l.USD))
		}
		tw.Flush()
		if f := b.FileSystem; f != nil {
			fmt.Fprintf(out, "  WAL file system: writes %.0f MB/s + reads %.0f MB/s = %.0f%% of the %.0f MB/s provisioned (%d file system(s), %.0f GiB SSD each)\n",
				f.WriteMBps, f.ReadMBps, f.Share*100, f.ProvisionedMBps, f.FileSystems, f.SSDGiB)
		}
		for _, a := range b.Assumptions {
			fmt.Fprintf(out, "  - %s\n", a)
		}
	}
}

// usd prints dollars with thousands separators.
func usd(v float64) string { return "$" + bench.Commas(int64(math.Round(v))) }

func qty(v float64) string {
	if v >= 1000 || v == math.Trunc(v) {
		return bench.Commas(int64(math.Round(v)))
	}
	return fmt.Sprintf("%.1f", v)
}
