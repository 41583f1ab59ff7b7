package cost

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Workload is what the cluster carries.
type Workload struct {
	ProduceMiBps float64       `json:"produce_mibps"`
	ConsumeMiBps float64       `json:"consume_mibps"` // every consumer group's reads together
	Retention    time.Duration `json:"retention"`
	Zones        int           `json:"zones"`
	// RackAwareConsumers: Kafka's consumers fetch from a replica in their own zone
	// (KIP-392). Weir's and AutoMQ's are served in their zone either way.
	RackAwareConsumers bool `json:"rack_aware_consumers"`
}

// Validate refuses a workload that cannot be priced.
func (w Workload) Validate() error {
	for _, f := range []float64{w.ProduceMiBps, w.ConsumeMiBps} {
		if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%w: produce and consume rates must be finite and >= 0", ErrTable)
		}
	}
	if w.Retention < 0 || w.Zones < 1 {
		return fmt.Errorf("%w: retention must be >= 0 and zones >= 1", ErrTable)
	}
	return nil
}

// Line is one line of a bill.
type Line struct {
	Item     string  `json:"item"`
	Quantity float64 `json:"quantity"`
	Unit     string  `json:"unit"`
	USD      float64 `json:"usd"`
	// Network marks the cross-zone network line: billed instance-to-instance transfer.
	Network bool `json:"network,omitempty"`
}

// Bill is one system's monthly bill for a workload.
type Bill struct {
	System      string   `json:"system"`
	Lines       []Line   `json:"lines"`
	Total       float64  `json:"total_usd"`
	Assumptions []string `json:"assumptions"`
	// FileSystem is the WAL file system's load, for the systems that have one.
	FileSystem *FileSystemLoad `json:"file_system,omitempty"`
}

// FileSystemLoad is what a shared WAL file system carries, beside what is provisioned.
type FileSystemLoad struct {
	WriteMBps       float64 `json:"write_mbps"`
	ReadMBps        float64 `json:"read_mbps"`
	ProvisionedMBps float64 `json:"provisioned_mbps"`
	Share           float64 `json:"share"` // (write + read) / provisioned
	FileSystems     int     `json:"file_systems"`
	SSDGiB          float64 `json:"ssd_gib"` // per file system
}

func (b *Bill) add(item string, qty float64, unit string, usd float64) {
	b.Lines = append(b.Lines, Line{Item: item, Quantity: qty, Unit: unit, USD: usd})
	b.Total += usd
}

func (b *Bill) addNetwork(gib float64, p Prices) {
	b.add("cross-zone network (instance to instance)", gib, "GiB", gib*p.CrossZonePerGiB)
	b.Lines[len(b.Lines)-1].Network = true
}

// volumes are a workload's monthly data in GiB.
type volumes struct {
	produced, consumed, retained float64 // a month's produce and consume; one copy of the retention
}

func volumesOf(w Workload, p Prices) volumes {
	secs := p.HoursPerMonth * 3600
	return volumes{
		produced: w.ProduceMiBps * secs / 1024,
		consumed: w.ConsumeMiBps * secs / 1024,
		retained: w.ProduceMiBps * w.Retention.Seconds() / 1024,
	}
}

// brokers is how many broker instances carry mibps in their busier direction at the
// table's utilization: at least one per zone, a multiple of the zone count.
func brokers(mibps float64, w Workload, t Table) int {
	n := int(math.Ceil(mibps / (t.Prices.BrokerInstanceMiBps * t.Assumptions.NetworkUtilization)))
	return roundToZones(n, w.Zones)
}

func roundToZones(n, zones int) int {
	n = max(n, zones)
	return (n + zones - 1) / zones * zones
}

func (b *Bill) addBrokers(n int, why string, t Table) {
	b.add(fmt.Sprintf("brokers (%s; %s)", t.Prices.BrokerInstance, why), float64(n), "instances", float64(n)*t.Prices.BrokerInstanceMonthly)
}

func (b *Bill) addControllers(t Table) {
	n := t.Assumptions.ControllerCount
	if n > 0 {
		b.add(fmt.Sprintf("controllers (%s)", t.Prices.ControllerInstance), float64(n), "instances", float64(n)*t.Prices.ControllerInstanceMonthly)
	}
}

func (b *Bill) addS3(v volumes, puts, gets float64, p Prices) {
	b.add("S3 storage (one copy of the retention)", v.retained, "GiB-month", v.retained*p.S3PerGiBMonth)
	b.add("S3 PUTs", puts, "requests", puts/1000*p.S3PutPer1000)
	b.add("S3 GETs", gets, "requests", gets/1000*p.S3GetPer1000)
}

// addFSx provisions file systems for writeMBps + readMBps (decimal MB/s) at the
// table's utilization: one of the smallest tier that carries it, else as many of the
// largest as it takes; each with at least walGiB / count of SSD. It records the load.
func (b *Bill) addFSx(writeMBps, readMBps, walGiB float64, t Table) {
	p, a := t.Prices, t.Assumptions
	need := (writeMBps + readMBps) / a.FSxUtilization
	tiers := p.FSxThroughputTiersMBps
	tier, n := tiers[len(tiers)-1], 1
	if i := slices.IndexFunc(tiers, func(t float64) bool { return t >= need }); i >= 0 {
		tier = tiers[i]
	} else {
		n = int(math.Ceil(need / tier))
	}
	ssd := math.Max(p.FSxMinSSDGiB, math.Ceil(walGiB/float64(n)))
	prov := float64(n) * tier
	b.add(fmt.Sprintf("FSx ONTAP Multi-AZ throughput capacity (%d × %.0f MB/s)", n, tier), prov, "MB/s-month", prov*p.FSxThroughputPerMBpsMonth)
	b.add(fmt.Sprintf("FSx ONTAP Multi-AZ SSD capacity (%d × %.0f GiB)", n, ssd), float64(n)*ssd, "GiB-month", float64(n)*ssd*p.FSxSSDPerGiBMonth)
	b.FileSystem = &FileSystemLoad{WriteMBps: writeMBps, ReadMBps: readMBps, ProvisionedMBps: prov,
		Share: (writeMBps + readMBps) / prov, FileSystems: n, SSDGiB: ssd}
}

// mbps converts MiB/s to the decimal MB/s FSx is sold in.
func mbps(mibps float64) float64 { return mibps * 1048576 / 1e6 }

// Weir prices the workload on Weir: brokers in every zone writing one shared WAL on
// FSx for ONTAP Multi-AZ and uploading it to S3, produces routed through a broker in
// the client's zone (a pointer crosses zones, not the records), consumers served by a
// read replica in their zone.
func Weir(w Workload, t Table) Bill {
	p, a := t.Prices, t.Assumptions
	v := volumesOf(w, p)
	b := Bill{System: "Weir (FSx WAL + S3)"}
	zr := float64(w.Zones - 1)                                          // the zones whose read replica reads each byte from the WAL
	out := w.ProduceMiBps*2 + w.ConsumeMiBps                            // WAL write, S3 upload, consumers
	in := w.ProduceMiBps*(1+zr) + w.ConsumeMiBps*a.WeirColdReadFraction // producers, WAL reads, cold GETs
	n := brokers(math.Max(in, out), w, t)
	b.addBrokers(n, fmt.Sprintf("network: in %.0f, out %.0f MiB/s", in, out), t)
	b.addControllers(t)
	b.addNetwork((v.produced+v.consumed)*a.WeirCrossZoneFraction, p)
	// Each broker uploads at least once per upload delay while it has data: below about
	// 6.7 MB/s a broker's objects are smaller than the 64 MiB target.
	puts := v.produced * a.WeirPutsPerGiB
	if a.WeirUploadDelaySeconds > 0 && w.ProduceMiBps > 0 {
		puts = math.Max(puts, float64(n)*p.HoursPerMonth*3600/a.WeirUploadDelaySeconds)
	}
	b.addS3(v, puts, v.consumed*a.WeirColdReadFraction*a.WeirGetsPerGiBCold, p)
	b.addFSx(mbps(w.ProduceMiBps), mbps(w.ProduceMiBps*zr), w.ProduceMiBps*a.WeirWALHeldSeconds/1024*2, t)
	b.Assumptions = []string{
		fmt.Sprintf("brokers: at least one per zone, sized so the busier direction of their network runs at %.0f%% of %s's %.0f MiB/s baseline; out = WAL write + S3 upload + consumers, in = producers + WAL reads by the read replicas of the %d other zones + cold reads",
			a.NetworkUtilization*100, p.BrokerInstance, p.BrokerInstanceMiBps, w.Zones-1),
		fmt.Sprintf("cross-zone: %.2f%% of produced + consumed bytes (pointers of proxied produces, metadata, clients without a zone; the multi-zone lab measures about 0.2%%: weir admin traffic)", a.WeirCrossZoneFraction*100),
		fmt.Sprintf("FSx: every produced byte written once and read once by each other zone's read replica (its cache serves the zone's consumers), at most %.0f%% of the throughput capacity; SSD for twice the %.0f s of traffic the WAL holds (at least %.0f GiB a file system); FSx Multi-AZ bills no cross-zone transfer: its throughput capacity includes it",
			a.FSxUtilization*100, a.WeirWALHeldSeconds, p.FSxMinSSDGiB),
		fmt.Sprintf("S3: one copy of the retention; %.0f PUTs per GiB produced (measured with 64 MiB objects), at least one PUT per broker every %.0f s (the upload delay); %.0f GETs per GiB of cold reads, %.0f%% of consumed bytes read cold",
			a.WeirPutsPerGiB, a.WeirUploadDelaySeconds, a.WeirGetsPerGiBCold, a.WeirColdReadFraction*100),
	}
	return b
}

// Kafka prices the workload on Apache Kafka without tiered storage: every partition
// on KafkaReplicationFactor brokers in as many zones, on EBS.
func Kafka(w Workload, t Table) Bill {
	p, a := t.Prices, t.Assumptions
	v := volumesOf(w, p)
	rf := float64(a.KafkaReplicationFactor)
	name := "Apache Kafka (RF 3, EBS)"
	if w.RackAwareConsumers {
		name = "Apache Kafka (RF 3, EBS, rack-aware consumers)"
	}
	b := Bill{System: name}
	in := w.ProduceMiBps * rf                     // producers and followers' fetches
	out := w.ProduceMiBps*(rf-1) + w.ConsumeMiBps // replication and consumers
	data := v.retained * rf
	byNet := brokers(math.Max(in, out), w, t)
	byData := roundToZones(int(math.Ceil(data/a.KafkaMaxDataPerBrokerGiB)), w.Zones)
	why := fmt.Sprintf("network: in %.0f, out %.0f MiB/s", in, out)
	if byData > byNet {
		why = fmt.Sprintf("data: %.0f GiB at most %.0f GiB a broker", data, a.KafkaMaxDataPerBrokerGiB)
	}
	b.addBrokers(max(byNet, byData), why, t)
	b.addControllers(t)
	b.add("EBS gp3 (every replica of the retention)", data*(1+a.KafkaEBSHeadroom), "GiB-month", data*(1+a.KafkaEBSHeadroom)*p.EBSPerGiBMonth)
	zf := float64(w.Zones-1) / float64(w.Zones) // a client's leader is in another zone
	crossings := (rf-1)*v.produced + zf*v.produced
	if !w.RackAwareConsumers {
		crossings += zf * v.consumed
	}
	b.addNetwork(crossings, p)
	consumers := fmt.Sprintf("consumers fetch from the leader, in another zone %.0f%% of the time", zf*100)
	if w.RackAwareConsumers {
		consumers = "consumers fetch from a replica in their own zone (KIP-392): no crossing"
	}
	b.Assumptions = []string{
		fmt.Sprintf("replication factor %.0f, one replica per zone: each produced byte crosses zones %.0f times to the followers, and %.0f%% of produced bytes reach a leader in another zone; %s",
			rf, rf-1, zf*100, consumers),
		fmt.Sprintf("brokers: the larger of the network count (%.0f%% of %s's %.0f MiB/s; in = %.0f × produce, out = %.0f × produce + consume) and the data count (%.0f GiB a broker), a multiple of the zones",
			a.NetworkUtilization*100, p.BrokerInstance, p.BrokerInstanceMiBps, rf, rf-1, a.KafkaMaxDataPerBrokerGiB),
		fmt.Sprintf("EBS: every replica of the retention, %.0f%% free space kept; no tiered storage", a.KafkaEBSHeadroom*100),
	}
	return b
}

// AutoMQS3WAL prices the workload on AutoMQ with its WAL on S3 (the open-source
// default): brokers write small WAL objects to S3 every few hundred ms.
func AutoMQS3WAL(w Workload, t Table) Bill {
	return autoMQ(w, t, "AutoMQ (S3 WAL)", t.Assumptions.AutoMQS3WALPutsPerGiB)
}

// AutoMQFSx prices the workload on AutoMQ with its WAL on FSx for ONTAP Multi-AZ (the
// seed's design): the WAL takes the writes, S3 the batched uploads.
func AutoMQFSx(w Workload, t Table) Bill {
	b := autoMQ(w, t, "AutoMQ (FSx WAL)", t.Assumptions.AutoMQFSxPutsPerGiB)
	b.addFSx(mbps(w.ProduceMiBps), 0, w.ProduceMiBps*t.Assumptions.WeirWALHeldSeconds/1024*2, t)
	b.Assumptions = append(b.Assumptions, fmt.Sprintf("FSx carries the WAL writes only, at most %.0f%% of its throughput capacity (the tail is read from the brokers' memory)", t.Assumptions.FSxUtilization*100))
	return b
}

func autoMQ(w Workload, t Table, name string, putsPerGiB float64) Bill {
	p, a := t.Prices, t.Assumptions
	v := volumesOf(w, p)
	b := Bill{System: name}
	out := w.ProduceMiBps*(1+a.AutoMQCompactionRead) + w.ConsumeMiBps
	b.addBrokers(brokers(out, w, t), fmt.Sprintf("network: out %.0f MiB/s", out), t)
	b.addNetwork(v.produced*a.AutoMQCrossZoneOfProduce, p)
	b.addS3(v, v.produced*putsPerGiB, v.produced*a.AutoMQS3WALGetsPerGiB, p)
	b.Assumptions = []string{
		fmt.Sprintf("brokers: controllers run in the brokers (AutoMQ's reference deployment); out = S3 upload + %.1f × produce re-read by compaction + consumers, at %.0f%% of %s's %.0f MiB/s",
			a.AutoMQCompactionRead, a.NetworkUtilization*100, p.BrokerInstance, p.BrokerInstanceMiBps),
		fmt.Sprintf("S3: one copy of the retention; %.0f PUTs and %.0f GETs per GiB produced", putsPerGiB, a.AutoMQS3WALGetsPerGiB),
		fmt.Sprintf("cross-zone: %.2f%% of produced bytes (AutoMQ's own bill at 1 GiB/s)", a.AutoMQCrossZoneOfProduce*100),
	}
	return b
}

// Compare prices the workload on every model: Weir first, then Kafka without and with
// rack-aware consumers, then AutoMQ with an S3 WAL and with an FSx WAL.
func Compare(w Workload, t Table) ([]Bill, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	plain, aware := w, w
	plain.RackAwareConsumers, aware.RackAwareConsumers = false, true
	return []Bill{Weir(w, t), Kafka(plain, t), Kafka(aware, t), AutoMQS3WAL(w, t), AutoMQFSx(w, t)}, nil
}
