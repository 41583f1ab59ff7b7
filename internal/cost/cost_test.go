package cost

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// seedTable is the price table of AutoMQ's published comparison, the source of the
// seed's figures ("AutoMQ vs. Apache Kafka Benchmarks and Cost": Apache Kafka $226,671
// a month at 1 GiB/s in and out with 3 days of retention, AutoMQ $12,899; the FSx
// article adds about $8,000 of FSx and quotes about $18,000): a 720-hour month, EBS at
// $0.09 per GiB-month (its region's gp3), no separate controllers.
func seedTable() Table {
	t := DefaultTable()
	t.Prices.HoursPerMonth = 720
	t.Prices.EBSPerGiBMonth = 0.09
	t.Assumptions.ControllerCount = 0
	return t
}

var seedWorkload = Workload{ProduceMiBps: 1024, ConsumeMiBps: 1024, Retention: 72 * time.Hour, Zones: 3, RackAwareConsumers: true}

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*want {
		t.Errorf("%s = $%.0f, want $%.0f ± %.0f%%", what, got, want, tol*100)
	}
}

func line(t *testing.T, b Bill, prefix string) Line {
	t.Helper()
	for _, l := range b.Lines {
		if strings.HasPrefix(l.Item, prefix) {
			return l
		}
	}
	t.Fatalf("%s: no line %q in %+v", b.System, prefix, b.Lines)
	return Line{}
}

func sumLines(b Bill, prefix string) (usd float64) {
	for _, l := range b.Lines {
		if strings.HasPrefix(l.Item, prefix) {
			usd += l.USD
		}
	}
	return usd
}

// The seed's worked example, reproduced line by line from the same assumptions:
// Kafka's storage and cross-zone lines exactly (three replicas of 3 days of 1 GiB/s
// on EBS; 2 + 2/3 crossings per produced byte with rack-aware consumers), its total
// within its compute uncertainty (AutoMQ does not say how it sized Kafka's brokers;
// here one per 16 TiB of data), AutoMQ's S3-WAL bill within 5%, the FSx line and the
// FSx-WAL total within the seed's "about".
func TestSeedWorkedExample(t *testing.T) {
	bills, err := Compare(seedWorkload, seedTable())
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]Bill{}
	for _, b := range bills {
		by[b.System] = b
		var sum float64
		for _, l := range b.Lines {
			sum += l.USD
		}
		if math.Abs(sum-b.Total) > 0.01 {
			t.Errorf("%s: lines sum to %.2f, total %.2f", b.System, sum, b.Total)
		}
		if len(b.Assumptions) == 0 {
			t.Errorf("%s: no assumptions written out", b.System)
		}
	}
	kafka := by["Apache Kafka (RF 3, EBS, rack-aware consumers)"]
	within(t, "Kafka EBS", line(t, kafka, "EBS").USD, 69984, 0.001)
	within(t, "Kafka cross-zone", line(t, kafka, "cross-zone").USD, 138240, 0.001)
	within(t, "Kafka total", kafka.Total, 226671, 0.05)
	// Without rack-aware consumers 2/3 of consumed bytes cross too.
	plain := by["Apache Kafka (RF 3, EBS)"]
	within(t, "Kafka cross-zone, consumers not rack-aware", line(t, plain, "cross-zone").USD, 138240+2.0/3*1024*720*3600/1024*0.02, 0.001)

	s3wal := by["AutoMQ (S3 WAL)"]
	within(t, "AutoMQ compute", line(t, s3wal, "brokers").USD, 2859, 0.001)
	within(t, "AutoMQ S3 storage", line(t, s3wal, "S3 storage").USD, 5961, 0.001)
	within(t, "AutoMQ S3 API", line(t, s3wal, "S3 PUTs").USD+line(t, s3wal, "S3 GETs").USD, 3952, 0.05)
	within(t, "AutoMQ cross-zone", line(t, s3wal, "cross-zone").USD, 128, 0.05)
	within(t, "AutoMQ total", s3wal.Total, 12899, 0.05)

	fsx := by["AutoMQ (FSx WAL)"]
	within(t, "AutoMQ FSx lines", sumLines(fsx, "FSx"), 8000, 0.15)
	within(t, "AutoMQ FSx total", fsx.Total, 18000, 0.15)
	if fs := fsx.FileSystem; fs == nil || fs.ProvisionedMBps != 3072 || fs.ReadMBps != 0 {
		t.Errorf("AutoMQ FSx file systems %+v, want the seed's 3,072 MB/s (it has two of 1,536), writes only", fs)
	}

	// Weir: the same S3 storage as AutoMQ, almost no cross-zone bill, and the FSx
	// carrying the writes plus one read by each other zone's replica.
	weir := by["Weir (FSx WAL + S3)"]
	within(t, "Weir S3 storage", line(t, weir, "S3 storage").USD, 5961, 0.001)
	if fs := weir.FileSystem; fs == nil || math.Abs(fs.ReadMBps-2*fs.WriteMBps) > 1e-6 || fs.Share > 0.6+1e-9 || fs.Share < 0.3 {
		t.Errorf("Weir's file system load %+v: want reads 2 × writes at most 60%% of the provisioned throughput", fs)
	}
	if n := line(t, weir, "cross-zone").USD; n > 0.01*line(t, kafka, "cross-zone").USD {
		t.Errorf("Weir's cross-zone bill $%.0f is more than 1%% of Kafka's", n)
	}
	if weir.Total > kafka.Total/5 {
		t.Errorf("Weir $%.0f, Kafka $%.0f", weir.Total, kafka.Total)
	}
}

// Brokers follow the workload: a cluster is at least one broker per zone, a multiple
// of the zone count; Kafka adds brokers for retained data.
func TestBrokerSizing(t *testing.T) {
	tab := DefaultTable()
	small := Workload{ProduceMiBps: 1, ConsumeMiBps: 1, Retention: time.Hour, Zones: 3}
	for _, b := range []Bill{Weir(small, tab), Kafka(small, tab), AutoMQS3WAL(small, tab)} {
		if n := line(t, b, "brokers").Quantity; n != 3 {
			t.Errorf("%s: %v brokers for 1 MiB/s, want 3 (one per zone)", b.System, n)
		}
	}
	long := small
	long.Retention = 365 * 24 * time.Hour // 30 TiB a replica
	if n := line(t, Kafka(long, tab), "brokers").Quantity; n != 6 {
		t.Errorf("Kafka: %v brokers for 3 × 30 TiB at 16 TiB a broker, want 6", n)
	}
	if n := line(t, Weir(long, tab), "brokers").Quantity; n != 3 {
		t.Errorf("Weir: %v brokers for a year of 1 MiB/s, want 3 (data is in S3)", n)
	}
	two := small
	two.Zones, two.ProduceMiBps = 2, 700 // out 1,401 MiB/s at 480 a broker: 3, rounded to 4
	if n := line(t, Weir(two, tab), "brokers").Quantity; n != 4 {
		t.Errorf("Weir in 2 zones at 700 MiB/s: %v brokers, want 4", n)
	}
}

func TestTableAndWorkloadValidation(t *testing.T) {
	bad := []func(*Table){
		func(t *Table) { t.Prices.S3PutPer1000 = -1 },
		func(t *Table) { t.Prices.HoursPerMonth = 0 },
		func(t *Table) { t.Assumptions.NetworkUtilization = 1.5 },
		func(t *Table) { t.Assumptions.FSxUtilization = math.NaN() },
		func(t *Table) { t.Assumptions.KafkaReplicationFactor = 0 },
		func(t *Table) { t.Assumptions.WeirCrossZoneFraction = 2 },
		func(t *Table) { t.Prices.FSxThroughputTiersMBps = nil },
		func(t *Table) { t.Prices.FSxThroughputTiersMBps = []float64{768, 384} },
	}
	for i, f := range bad {
		tab := DefaultTable()
		f(&tab)
		if _, err := Compare(seedWorkload, tab); !errors.Is(err, ErrTable) {
			t.Errorf("bad table %d: %v, want ErrTable", i, err)
		}
	}
	for _, w := range []Workload{{ProduceMiBps: -1, Zones: 3}, {ProduceMiBps: 1, Zones: 0}, {ConsumeMiBps: math.Inf(1), Zones: 3}} {
		if _, err := Compare(w, DefaultTable()); !errors.Is(err, ErrTable) {
			t.Errorf("bad workload %+v: %v, want ErrTable", w, err)
		}
	}
}

func TestReadTableOverridesAndRefusesUnknownFields(t *testing.T) {
	tab, err := ReadTable(strings.NewReader(`{"prices": {"s3_put_per_1000": 0.0054}, "assumptions": {"weir_puts_per_gib": 20}}`), DefaultTable())
	if err != nil {
		t.Fatal(err)
	}
	if tab.Prices.S3PutPer1000 != 0.0054 || tab.Assumptions.WeirPutsPerGiB != 20 || tab.Prices.S3PerGiBMonth != DefaultTable().Prices.S3PerGiBMonth {
		t.Fatalf("table %+v: want the two fields replaced, the rest kept", tab)
	}
	for _, in := range []string{`{"prices": {"s3_put_per_100": 1}}`, `{"prices": {"s3_put_per_1000": -1}}`, `not json`} {
		if _, err := ReadTable(strings.NewReader(in), DefaultTable()); !errors.Is(err, ErrTable) {
			t.Errorf("ReadTable(%s): %v, want ErrTable", in, err)
		}
	}
}

// A file system is the smallest tier that carries the WAL's reads and writes at the
// table's utilization; past the largest tier, as many of the largest as it takes.
func TestFSxTiers(t *testing.T) {
	tab := DefaultTable()
	for _, c := range []struct {
		produce float64
		n       int
		tier    float64
	}{
		{10, 1, 384},     // 31 MB/s of writes and reads: the smallest tier
		{100, 1, 768},    // 315 MB/s / 0.6 = 524
		{1024, 1, 6144},  // 3,221 / 0.6 = 5,369
		{2048, 2, 6144},  // 10,737: two of the largest
		{10240, 9, 6144}, // 53,687: ceil(53,687 / 6,144)
	} {
		w := Workload{ProduceMiBps: c.produce, ConsumeMiBps: c.produce, Retention: time.Hour, Zones: 3}
		fs := Weir(w, tab).FileSystem
		if fs.FileSystems != c.n || fs.ProvisionedMBps != float64(c.n)*c.tier || fs.Share > tab.Assumptions.FSxUtilization {
			t.Errorf("%v MiB/s: %+v, want %d × %v MB/s at most %v busy", c.produce, fs, c.n, c.tier, tab.Assumptions.FSxUtilization)
		}
	}
}

// A slow cluster's brokers still upload once per upload delay: PUTs have a floor of one
// per broker per delay, above the per-GiB figure at low rates and below it at high ones.
func TestWeirPutsFloor(t *testing.T) {
	tab := DefaultTable()
	puts := func(mibps float64) float64 {
		return line(t, Weir(Workload{ProduceMiBps: mibps, ConsumeMiBps: mibps, Retention: time.Hour, Zones: 3}, tab), "S3 PUTs").Quantity
	}
	month := tab.Prices.HoursPerMonth * 3600
	if got, want := puts(1), 3*month/10; got != want {
		t.Errorf("1 MiB/s: %v PUTs, want one per broker per 10 s (%v)", got, want)
	}
	if got, want := puts(1024), 1024*month/1024*16; got != want {
		t.Errorf("1 GiB/s: %v PUTs, want 16 per GiB (%v)", got, want)
	}
	tab.Assumptions.WeirUploadDelaySeconds = 0
	if got := puts(1); got != month/1024*16 {
		t.Errorf("no floor: %v PUTs at 1 MiB/s", got)
	}
}
