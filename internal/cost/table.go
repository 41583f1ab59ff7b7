// Package cost prices a streaming workload on Weir and on the systems it is compared
// with (Apache Kafka with replication factor 3, AutoMQ with an S3 WAL, AutoMQ with an
// FSx WAL): a monthly bill by line, each model's assumptions written out beside it.
//
// Every number the models use is in a Table: the Prices of one cloud region and the
// Assumptions of the models (how busy an instance's network may run, how many S3
// requests a GiB costs each system, ...). DefaultTable holds AWS us-east-1 list prices
// and the figures Weir measured; a JSON file overrides any field (`weir admin cost
// --table`). Units: data rates in MiB/s, data in GiB (AWS bills a "GB" of 2^30 bytes),
// money in USD, a month of Prices.HoursPerMonth hours.
package cost

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
)

// ErrTable is wrapped by every error of a table or a workload that cannot be priced.
var ErrTable = errors.New("cost")

// Prices are a region's list prices, in USD.
type Prices struct {
	Region        string  `json:"region"`
	HoursPerMonth float64 `json:"hours_per_month"`

	// BrokerInstance runs a broker (every system the same type, so compute compares
	// like with like); its monthly price and the network bandwidth it sustains (the
	// baseline, not the burst) in each direction.
	BrokerInstance        string  `json:"broker_instance"`
	BrokerInstanceMonthly float64 `json:"broker_instance_monthly"`
	BrokerInstanceMiBps   float64 `json:"broker_instance_net_mibps"`
	// ControllerInstance runs a metadata controller (Weir's Raft, Kafka's KRaft).
	ControllerInstance        string  `json:"controller_instance"`
	ControllerInstanceMonthly float64 `json:"controller_instance_monthly"`

	// CrossZonePerGiB: a GiB between two zones of the region (AWS bills 0.01 out of one
	// zone and 0.01 into the other).
	CrossZonePerGiB float64 `json:"cross_zone_per_gib"`
	// EBSPerGiBMonth: block storage (gp3) a broker keeps its log on.
	EBSPerGiBMonth float64 `json:"ebs_per_gib_month"`
	// S3 Standard storage and requests.
	S3PerGiBMonth float64 `json:"s3_per_gib_month"`
	S3PutPer1000  float64 `json:"s3_put_per_1000"`
	S3GetPer1000  float64 `json:"s3_get_per_1000"`
	// FSx for NetApp ONTAP, Multi-AZ: SSD capacity and provisioned throughput capacity
	// (which includes the transfer between the file system's two zones). A file system
	// is sold in the throughput tiers of FSxThroughputTiersMBps (decimal MB/s, as AWS
	// sells it; ascending) with at least FSxMinSSDGiB of SSD.
	FSxSSDPerGiBMonth         float64   `json:"fsx_ssd_per_gib_month"`
	FSxThroughputPerMBpsMonth float64   `json:"fsx_throughput_per_mbps_month"`
	FSxThroughputTiersMBps    []float64 `json:"fsx_throughput_tiers_mbps"`
	FSxMinSSDGiB              float64   `json:"fsx_min_ssd_gib"`
}

// Assumptions are the models' parameters that are not prices.
type Assumptions struct {
	// NetworkUtilization: the share of an instance's baseline bandwidth a broker may use
	// at the workload's rate (the rest is headroom for peaks, catch-up reads, moves).
	NetworkUtilization float64 `json:"network_utilization"`
	// ControllerCount: Weir's Raft controllers and Kafka's KRaft controllers. AutoMQ's
	// reference deployment runs its controllers in its brokers' processes.
	ControllerCount int `json:"controller_count"`

	// KafkaReplicationFactor: replicas of every partition, one per zone.
	KafkaReplicationFactor int `json:"kafka_replication_factor"`
	// KafkaEBSHeadroom: free space kept on Kafka's volumes, as a share of the data (0:
	// volumes exactly full, as AutoMQ's comparison prices them).
	KafkaEBSHeadroom float64 `json:"kafka_ebs_headroom"`
	// KafkaMaxDataPerBrokerGiB: the log one Kafka broker keeps (a gp3 volume holds at
	// most 16 TiB, and a broker's data bounds how long its replacement takes to catch
	// up): more retained data means more brokers.
	KafkaMaxDataPerBrokerGiB float64 `json:"kafka_max_data_per_broker_gib"`

	// AutoMQ with an S3 WAL (its open-source default): S3 requests per GiB produced,
	// from AutoMQ's own measurements (147.3 PUTs and 63.6 GETs a second at 500 MB/s);
	// its compaction re-reads about half of what is written; the share of produced
	// bytes that still crosses zones (AutoMQ's bill shows $128 at 1 GiB/s).
	AutoMQS3WALPutsPerGiB    float64 `json:"automq_s3wal_puts_per_gib"`
	AutoMQS3WALGetsPerGiB    float64 `json:"automq_s3wal_gets_per_gib"`
	AutoMQCompactionRead     float64 `json:"automq_compaction_read"`
	AutoMQCrossZoneOfProduce float64 `json:"automq_cross_zone_of_produce"`
	// AutoMQ with an FSx WAL: uploads batched from the WAL (PUTs per GiB produced);
	// FSx carries the WAL writes only (AutoMQ serves tail reads from its brokers' memory).
	AutoMQFSxPutsPerGiB float64 `json:"automq_fsx_puts_per_gib"`

	// Weir: the share of produced + consumed bytes that crosses zones (pointers,
	// metadata, clients without a zone: the multi-zone lab measures about 0.2%); S3
	// PUTs per GiB produced (uploads) and GETs per GiB of cold reads; the share of
	// consumed bytes read from objects rather than from the WAL and the brokers' caches;
	// the seconds of produced traffic the WAL holds at steady state (the FSx SSD it
	// needs); and the FSx reads per produced byte: a read replica in each zone but the
	// writer's reads each byte once from the shared WAL (zones - 1), which assumes its
	// cache serves every consumer of the zone.
	WeirCrossZoneFraction float64 `json:"weir_cross_zone_fraction"`
	WeirPutsPerGiB        float64 `json:"weir_puts_per_gib"`
	// WeirUploadDelaySeconds: --upload-max-delay; a broker with data uploads at least this
	// often, so slow brokers make more PUTs per GiB than WeirPutsPerGiB (0: ignored).
	WeirUploadDelaySeconds float64 `json:"weir_upload_delay_seconds"`
	WeirGetsPerGiBCold     float64 `json:"weir_gets_per_gib_cold"`
	WeirColdReadFraction   float64 `json:"weir_cold_read_fraction"`
	WeirWALHeldSeconds     float64 `json:"weir_wal_held_seconds"`
	// FSxUtilization: the share of a file system's throughput capacity the WAL may use.
	FSxUtilization float64 `json:"fsx_utilization"`
}

// Table is everything a bill is computed from.
type Table struct {
	Prices      Prices      `json:"prices"`
	Assumptions Assumptions `json:"assumptions"`
}

// DefaultTable: AWS us-east-1 on-demand list prices (2025) and the figures Weir
// measured. FSx's throughput price is calibrated to the seed's FSx line (about $8,000 a
// month for two 1,536 MB/s Multi-AZ file systems, 3,072 MB/s); check AWS's price pages before
// relying on any of them, and override what differs in a --table file.
func DefaultTable() Table {
	return Table{
		Prices: Prices{
			Region:                    "aws us-east-1 (on-demand, 2025 list prices)",
			HoursPerMonth:             730,
			BrokerInstance:            "m7g.4xlarge",
			BrokerInstanceMonthly:     476.544, // 0.6528 USD/h
			BrokerInstanceMiBps:       960,     // AutoMQ's figure for its baseline
			ControllerInstance:        "m7g.large",
			ControllerInstanceMonthly: 59.568, // 0.0816 USD/h
			CrossZonePerGiB:           0.02,
			EBSPerGiBMonth:            0.08,
			S3PerGiBMonth:             0.023,
			S3PutPer1000:              0.005,
			S3GetPer1000:              0.0004,
			FSxSSDPerGiBMonth:         0.25,
			FSxThroughputPerMBpsMonth: 2.40,
			FSxThroughputTiersMBps:    []float64{384, 768, 1536, 3072, 6144}, // second generation, Multi-AZ
			FSxMinSSDGiB:              1024,
		},
		Assumptions: Assumptions{
			NetworkUtilization:       0.5,
			ControllerCount:          3,
			KafkaReplicationFactor:   3,
			KafkaEBSHeadroom:         0,
			KafkaMaxDataPerBrokerGiB: 16 << 10,
			AutoMQS3WALPutsPerGiB:    147.3 / 500 * 1024, // its "MB" is a MiB (1,024 to its GB)
			AutoMQS3WALGetsPerGiB:    63.6 / 500 * 1024,
			AutoMQCompactionRead:     0.5,
			AutoMQCrossZoneOfProduce: 0.0025,
			AutoMQFSxPutsPerGiB:      16,
			WeirCrossZoneFraction:    0.002,
			WeirUploadDelaySeconds:   10,
			WeirPutsPerGiB:           16,  // 64 MiB objects of many partitions: 15.8-16.3 measured at 17 MB/s per broker (docs/PERFORMANCE.md)
			WeirGetsPerGiBCold:       400, // 4 MiB ranged GETs, readahead, index loads: 336-457 measured (make bench, cold rows)
			WeirColdReadFraction:     0,
			WeirWALHeldSeconds:       20, // the bound at the defaults: segment max age 10 s + upload delay 10 s
			FSxUtilization:           0.6,
		},
	}
}

func ascending(tiers []float64) bool {
	for i, t := range tiers {
		if !(t > 0) || math.IsInf(t, 0) || (i > 0 && t <= tiers[i-1]) {
			return false
		}
	}
	return len(tiers) > 0
}

// ReadTable decodes a JSON table over base: fields the file names replace base's, the
// others stay. Unknown fields are refused (a misspelt price would otherwise be
// silently ignored).
func ReadTable(r io.Reader, base Table) (Table, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	t := base
	if err := dec.Decode(&t); err != nil {
		return base, fmt.Errorf("%w: reading the table: %v", ErrTable, err)
	}
	return t, t.Validate()
}

// Validate refuses a table a bill cannot be computed from: every number finite and
// not negative, the ones divided by positive, shares at most 1.
func (t Table) Validate() error {
	for _, s := range []any{t.Prices, t.Assumptions} {
		v := reflect.ValueOf(s)
		for i := 0; i < v.NumField(); i++ {
			var f float64
			switch x := v.Field(i).Interface().(type) {
			case float64:
				f = x
			case int:
				f = float64(x)
			default:
				continue
			}
			if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("%w: %s is %v: want a finite number >= 0", ErrTable, v.Type().Field(i).Tag.Get("json"), f)
			}
		}
	}
	p, a := t.Prices, t.Assumptions
	switch {
	case p.HoursPerMonth == 0 || p.BrokerInstanceMiBps == 0:
		return fmt.Errorf("%w: hours_per_month and broker_instance_net_mibps must be > 0", ErrTable)
	case !ascending(p.FSxThroughputTiersMBps):
		return fmt.Errorf("%w: fsx_throughput_tiers_mbps must be one or more ascending numbers > 0", ErrTable)
	case a.NetworkUtilization == 0 || a.NetworkUtilization > 1 || a.FSxUtilization == 0 || a.FSxUtilization > 1:
		return fmt.Errorf("%w: network_utilization and fsx_utilization must be in (0, 1]", ErrTable)
	case a.KafkaReplicationFactor < 1 || a.KafkaMaxDataPerBrokerGiB == 0:
		return fmt.Errorf("%w: kafka_replication_factor must be >= 1 and kafka_max_data_per_broker_gib > 0", ErrTable)
	case a.WeirCrossZoneFraction > 1 || a.WeirColdReadFraction > 1 || a.AutoMQCrossZoneOfProduce > 1:
		return fmt.Errorf("%w: a fraction is above 1", ErrTable)
	}
	return nil
}
