package chaos

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/test/nfsfs"
)

// Config is one chaos run.
type Config struct {
	// Own cluster: the weir binary and a directory (empty: a temporary one).
	Bin  string
	Dir  string
	Keep bool
	// Attach: bootstrap servers of an existing cluster, and commands that act on broker
	// {id} (or controller {id}); empty commands make those faults unavailable.
	Bootstrap                                   string
	KillCmd, StartCmd, PauseCmd, ResumeCmd      string
	StopCmd, CutCmd, HealCmd, KillControllerCmd string
	StartControllerCmd                          string
	ControllerLeaderCmd                         string // prints the leader controller's id
	BrokerIDs                                   string // attach: comma-separated broker ids (default: from Metadata)
	brokerArgs, controllerArgs                  []string
	// Controllers: attach, the controllers' API addresses (comma-separated), which
	// coordinator-move needs; ControllerClient carries the credentials for them
	// (--cluster-token-file, --controller-tls-*). An own cluster uses its own.
	Controllers      string
	ControllerClient ctlclient.ClientConfig

	// Load.
	Topic       string
	Partitions  int
	Rate        float64 // records/s over all producers
	Producers   int
	RecordSize  int
	Members     int  // consumer group members
	RackReaders bool // one rack-aware consumer per zone reading everything
	// ZoneClients tags the producers with zones (zone routing: proxy produce).
	ZoneClients bool
	// Txn adds TxnWriters transactional writers of TxnRecords records per transaction
	// to the topic Topic-txn, checked with read_committed at the end (txn.go).
	Txn        bool
	TxnWriters int
	TxnRecords int
	// GroupProtocol is the consumer group's protocol: "classic" (JoinGroup/SyncGroup,
	// the client's balancer) or "consumer" (KIP-848: ConsumerGroupHeartbeat, the
	// server's assignor; groupproto.go).
	GroupProtocol string
	// Compacted adds a keyed writer of CompactedKeys keys with increasing versions to
	// the compacted topic Topic-compacted at CompactedRate records/s, checked at the
	// end from the topic's start (compacted.go).
	Compacted     bool
	CompactedKeys int
	CompactedRate float64
	// Share adds ShareMembers share consumers (KIP-932, one share group) reading the
	// topic Topic-share as a queue, which a producer feeds at ShareRate records/s; at
	// the end every acked record must have been delivered and the group's start offset
	// be at each partition's end (share.go).
	Share        bool
	ShareMembers int
	ShareRate    float64

	// Faults.
	Faults       []Fault
	Random       bool
	Seed         uint64
	Every        time.Duration
	Kinds        string
	Duration     time.Duration // how long the load runs
	RestartAfter time.Duration // a killed process is started again after this
	PauseFor     time.Duration
	CutFor       time.Duration
	Settle       time.Duration // load before the first fault and after the last
	StorageFor   time.Duration // how long storage-freeze, storage-slow and storage-error last
	SlowBy       time.Duration // storage-slow: extra latency per operation

	// FSx: an own cluster's WAL root is served by test/nfsfs with this profile ("":
	// a plain shared directory). FSxControl: attached, the URL of an nfsfs control
	// handler (nfsfs.Model.Handler) for storage faults.
	FSx, FSxControl string

	Interval time.Duration // progress lines
	JSON     bool
	PNG      string
}

// DefaultConfig returns a one-minute run on a 3-controller, 3-broker cluster.
func DefaultConfig() Config {
	self, _ := os.Executable()
	return Config{
		Bin: self, Topic: "chaos", Partitions: 60, Rate: 2000, Producers: 4, RecordSize: 100, Members: 3,
		RackReaders: true, TxnWriters: 2, TxnRecords: 5, GroupProtocol: "classic",
		CompactedKeys: 100, CompactedRate: 200, ShareMembers: 2, ShareRate: 200, Duration: time.Minute, RestartAfter: 5 * time.Second, PauseFor: 6 * time.Second,
		CutFor: 6 * time.Second, Settle: 5 * time.Second, StorageFor: 10 * time.Second, SlowBy: 200 * time.Millisecond, Every: 20 * time.Second, Seed: 1,
		Kinds:            "kill,pause,controller-leader-kill,rolling-restart,isolate",
		Interval:         5 * time.Second,
		ControllerClient: ctlclient.DefaultClientConfig(),
	}
}

// FaultKind names a fault.
type FaultKind string

const (
	Kill                 FaultKind = "kill"                   // SIGKILL a broker, start it again after RestartAfter
	KillMany             FaultKind = "kill-many"              // SIGKILL N brokers one second apart
	Pause                FaultKind = "pause"                  // SIGSTOP a broker for PauseFor, then SIGCONT
	ControllerLeaderKill FaultKind = "controller-leader-kill" // SIGKILL the Raft leader, start it again
	RollingRestart       FaultKind = "rolling-restart"        // SIGTERM each broker in turn, waiting for it
	Isolate              FaultKind = "isolate"                // cut a broker off the controllers for CutFor

	// File system faults (storage.go): they need the WAL root served by test/nfsfs
	// (--fsx with an own cluster, --fsx-control when attached).
	StorageFreeze FaultKind = "storage-freeze" // every I/O of every broker blocks for StorageFor (a Multi-AZ failover)
	StorageSlow   FaultKind = "storage-slow"   // one broker's mount (ARG, default the busiest) gets SlowBy extra latency for StorageFor
	StorageError  FaultKind = "storage-error"  // WRITE and COMMIT fail with ARG (EIO, ENOSPC, ESTALE; default EIO) for StorageFor

	// Zone faults (zones.go; own cluster only).
	ZoneOutage    FaultKind = "zone-outage"    // SIGKILL every broker and the controller of zone ARG (default: the busiest broker's), start them again after RestartAfter
	ZonePartition FaultKind = "zone-partition" // cut the brokers of zone ARG off the controllers for CutFor (see zones.go for what is not cut)

	// Group coordinator faults (coordinator.go): the broker leading the
	// __consumer_offsets partition of the load's group (chaos-TOPIC).
	CoordinatorMove FaultKind = "coordinator-move" // move the group's __consumer_offsets partition gracefully to broker ARG (default: another, at random)
	CoordinatorKill FaultKind = "coordinator-kill" // SIGKILL the group's coordinator, start it again after RestartAfter
	// TxnCoordinatorKill (--txn): SIGKILL the broker FindCoordinator (transaction key)
	// names for the first transactional writer's id, start it again after RestartAfter.
	TxnCoordinatorKill FaultKind = "txn-coordinator-kill"
	// TxnLeaderKill (--txn; txnfaults.go): a writer of its own adds partitions to a
	// transaction and produces; the broker leading one of them is SIGKILLed before the
	// commit, and started again after RestartAfter.
	TxnLeaderKill FaultKind = "txn-leader-kill"
	// TxnProducerPause (--txn; txnfaults.go): a writer of its own stops mid-transaction
	// past its transaction timeout, then asks to commit: the coordinator must have
	// aborted it and fenced the producer; its later transactions must commit.
	TxnProducerPause FaultKind = "txn-producer-pause"
)

// txnFault reports whether kind needs --txn.
func txnFault(kind FaultKind) bool {
	return kind == TxnCoordinatorKill || kind == TxnLeaderKill || kind == TxnProducerPause
}

// faultKinds lists every kind (the parse error and --help).
const faultKinds = "kill, kill-many, pause, controller-leader-kill, rolling-restart, isolate, storage-freeze, storage-slow, storage-error, zone-outage, zone-partition, coordinator-move, coordinator-kill, txn-coordinator-kill, txn-leader-kill, txn-producer-pause"

// group is the load's consumer group.
func (c *Config) group() string { return "chaos-" + c.Topic }

// Fault is one scheduled fault: Kind at At after the start, on Broker (0: any, chosen at
// random with the seed) or N brokers (kill-many).
type Fault struct {
	Kind   FaultKind
	At     time.Duration
	Broker int32
	N      int
	Arg    string // storage-error: the errno; zone faults: the zone
}

func (f Fault) String() string {
	s := string(f.Kind)
	switch {
	case f.Kind == KillMany:
		s += fmt.Sprintf(":%d", f.N)
	case f.Broker > 0:
		s += fmt.Sprintf(":%d", f.Broker)
	case f.Arg != "":
		s += ":" + f.Arg
	}
	return s + "@" + f.At.String()
}

// ParseFault reads KIND[:ARG]@OFFSET: kill:2@10s, pause@30s (any broker), kill-many:2@50s,
// controller-leader-kill@70s, rolling-restart@90s, isolate:3@110s, storage-freeze@20s,
// storage-slow:2@20s, storage-error:ENOSPC@20s, zone-outage:b@30s, zone-partition:a@30s,
// coordinator-move@40s, coordinator-move:3@40s, coordinator-kill@50s.
func ParseFault(spec string) (Fault, error) {
	var f Fault
	what, at, ok := strings.Cut(spec, "@")
	if !ok {
		return f, fmt.Errorf("chaos: fault %q: want KIND[:ARG]@OFFSET", spec)
	}
	d, err := time.ParseDuration(at)
	if err != nil {
		return f, fmt.Errorf("chaos: fault %q: %w", spec, err)
	}
	f.At = d
	kind, arg, _ := strings.Cut(what, ":")
	f.Kind = FaultKind(kind)
	switch f.Kind {
	case Kill, Pause, Isolate, StorageSlow, CoordinatorMove:
		if arg != "" {
			n, err := strconv.Atoi(arg)
			if err != nil || n < 1 {
				return f, fmt.Errorf("chaos: fault %q: bad broker %q", spec, arg)
			}
			f.Broker = int32(n)
		}
	case KillMany:
		f.N = 2
		if arg != "" {
			n, err := strconv.Atoi(arg)
			if err != nil || n < 1 {
				return f, fmt.Errorf("chaos: fault %q: bad count %q", spec, arg)
			}
			f.N = n
		}
	case ControllerLeaderKill, RollingRestart, StorageFreeze, CoordinatorKill, TxnCoordinatorKill, TxnLeaderKill, TxnProducerPause:
		if arg != "" {
			return f, fmt.Errorf("chaos: fault %q takes no argument", spec)
		}
	case StorageError:
		f.Arg = strings.ToUpper(arg)
		if f.Arg == "" {
			f.Arg = "EIO"
		}
		if _, ok := nfsfs.Errnos[f.Arg]; !ok {
			return f, fmt.Errorf("chaos: fault %q: unknown errno %q (EIO, ENOSPC, ESTALE, EDQUOT)", spec, arg)
		}
	case ZoneOutage, ZonePartition:
		f.Arg = arg
	default:
		return f, fmt.Errorf("chaos: unknown fault kind %q (%s)", kind, faultKinds)
	}
	return f, nil
}

// randomFaults draws a fault every cfg.Every from cfg.Kinds with the seed.
func randomFaults(cfg Config) ([]Fault, error) {
	var kinds []FaultKind
	for _, k := range strings.Split(cfg.Kinds, ",") {
		f, err := ParseFault(strings.TrimSpace(k) + "@0s")
		if err != nil {
			return nil, err
		}
		kinds = append(kinds, f.Kind)
	}
	r := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed))
	var out []Fault
	for at := cfg.Settle; at < cfg.Duration-cfg.Settle; at += cfg.Every {
		f := Fault{Kind: kinds[r.IntN(len(kinds))], At: at}
		if f.Kind == KillMany {
			f.N = 2
		}
		out = append(out, f)
	}
	return out, nil
}

// BindFlags registers the flags of `weir chaos` on fs.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Bin, "weir", c.Bin, "the weir binary the cluster runs (own cluster)")
	fs.StringVar(&c.Dir, "dir", c.Dir, "directory for the own cluster's data and logs (default: a temporary one, removed afterwards)")
	fs.BoolVar(&c.Keep, "keep", c.Keep, "keep the data directory and logs")
	fs.StringVar(&c.Bootstrap, "bootstrap", c.Bootstrap, "attach to this cluster (comma-separated Kafka addresses) instead of running one")
	fs.StringVar(&c.BrokerIDs, "broker-ids", c.BrokerIDs, "attach: the broker ids faults may hit (default: every broker in Metadata)")
	fs.StringVar(&c.KillCmd, "kill-cmd", c.KillCmd, "attach: shell command that SIGKILLs broker {id}")
	fs.StringVar(&c.StartCmd, "start-cmd", c.StartCmd, "attach: shell command that starts broker {id}")
	fs.StringVar(&c.StopCmd, "stop-cmd", c.StopCmd, "attach: shell command that stops broker {id} gracefully (SIGTERM) and waits")
	fs.StringVar(&c.PauseCmd, "pause-cmd", c.PauseCmd, "attach: shell command that pauses broker {id} (SIGSTOP)")
	fs.StringVar(&c.ResumeCmd, "resume-cmd", c.ResumeCmd, "attach: shell command that resumes broker {id} (SIGCONT)")
	fs.StringVar(&c.CutCmd, "cut-cmd", c.CutCmd, "attach: shell command that cuts broker {id} off the controllers")
	fs.StringVar(&c.HealCmd, "heal-cmd", c.HealCmd, "attach: shell command that undoes --cut-cmd for broker {id}")
	fs.StringVar(&c.ControllerLeaderCmd, "controller-leader-cmd", c.ControllerLeaderCmd, "attach: shell command printing the id of the controller leader")
	fs.StringVar(&c.KillControllerCmd, "kill-controller-cmd", c.KillControllerCmd, "attach: shell command that SIGKILLs controller {id}")
	fs.StringVar(&c.StartControllerCmd, "start-controller-cmd", c.StartControllerCmd, "attach: shell command that starts controller {id}")
	fs.StringVar(&c.Controllers, "controllers", c.Controllers, "attach: comma-separated controller API addresses (coordinator-move moves a partition through them)")
	c.ControllerClient.BindSecurityFlags(fs)
	fs.StringVar(&c.Topic, "topic", c.Topic, "topic the load writes (created if missing)")
	fs.IntVar(&c.Partitions, "partitions", c.Partitions, "partitions of the topic")
	fs.Float64Var(&c.Rate, "rate", c.Rate, "records per second over all producers")
	fs.IntVar(&c.Producers, "producers", c.Producers, "idempotent producers")
	fs.IntVar(&c.RecordSize, "record-size", c.RecordSize, "bytes per record (at least the unique value)")
	fs.IntVar(&c.Members, "members", c.Members, "members of the consumer group reading everything back (0: none)")
	fs.BoolVar(&c.RackReaders, "rack-readers", c.RackReaders, "one rack-aware consumer per zone reading everything back")
	fs.BoolVar(&c.ZoneClients, "zone-clients", c.ZoneClients, "tag producer i with zone i (weir_az= in client.id): its produces go through that zone's brokers as proxies, so faults hit proxies and links too")
	fs.BoolVar(&c.Txn, "txn", c.Txn, "add transactional writers (--txn-writers, each its own transactional id) to the topic TOPIC-txn: begin, --txn-records records, commit, or abort one in five; a read_committed reader checks at the end that committed transactions are all there once, aborted ones absent, unknown ones all or nothing")
	fs.IntVar(&c.TxnWriters, "txn-writers", c.TxnWriters, "with --txn: transactional writers")
	fs.IntVar(&c.TxnRecords, "txn-records", c.TxnRecords, "with --txn: records per transaction")
	fs.StringVar(&c.GroupProtocol, "group-protocol", c.GroupProtocol, "the consumer group's protocol: classic, or consumer (KIP-848: the server assigns, members heartbeat with epochs); the report names it and counts rebalances and member epoch changes per fault")
	fs.BoolVar(&c.Compacted, "compacted", c.Compacted, "add a keyed writer (--compacted-keys keys, increasing versions) to the compacted topic TOPIC-compacted (min.cleanable.dirty.ratio 0.01); at the end the topic is read from its start: each key's last record must be its latest acked version (or a later one sent), at its acked offset, versions increasing, nothing unsent. An own cluster's brokers clean every second")
	fs.IntVar(&c.CompactedKeys, "compacted-keys", c.CompactedKeys, "with --compacted: keys")
	fs.Float64Var(&c.CompactedRate, "compacted-rate", c.CompactedRate, "with --compacted: records per second (1 KB each)")
	fs.BoolVar(&c.Share, "share", c.Share, "add --share-members share consumers (KIP-932, group chaos-TOPIC-share) reading TOPIC-share as a queue; at the end every acked record must have been delivered and accepted, redeliveries counted. An own cluster's brokers run with --share-groups and --share-auto-offset-reset=earliest; attached, the cluster needs both")
	fs.IntVar(&c.ShareMembers, "share-members", c.ShareMembers, "with --share: share consumers")
	fs.Float64Var(&c.ShareRate, "share-rate", c.ShareRate, "with --share: records per second to TOPIC-share")
	fs.Func("fault", "a fault: KIND[:ARG]@OFFSET, e.g. kill:2@10s, pause@30s, kill-many:2@50s, controller-leader-kill@70s, rolling-restart@90s, isolate:1@110s, coordinator-move@130s, coordinator-kill@150s (repeatable); kinds: "+faultKinds, func(s string) error {
		f, err := ParseFault(s)
		if err == nil {
			c.Faults = append(c.Faults, f)
		}
		return err
	})
	fs.BoolVar(&c.Random, "random", c.Random, "faults at random (with --seed) every --every, of --kinds")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of --random and of brokers chosen for faults without one")
	fs.DurationVar(&c.Every, "every", c.Every, "with --random: time between faults")
	fs.StringVar(&c.Kinds, "kinds", c.Kinds, "with --random: the fault kinds to draw from (any of --fault's kinds, e.g. add coordinator-move,coordinator-kill)")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "how long the load runs")
	fs.DurationVar(&c.RestartAfter, "restart-after", c.RestartAfter, "a killed broker or controller is started again after this")
	fs.DurationVar(&c.PauseFor, "pause-for", c.PauseFor, "how long a paused broker stays paused (longer than fencing, about 1 s, to test it)")
	fs.DurationVar(&c.CutFor, "cut-for", c.CutFor, "how long an isolated broker stays cut off the controllers")
	fs.DurationVar(&c.Settle, "settle", c.Settle, "load before the first fault and after the last one")
	fs.DurationVar(&c.Interval, "interval", c.Interval, "time between progress lines")
	fs.StringVar(&c.FSx, "fsx", c.FSx, "own cluster: serve the WAL root through the lab's FSx-like FUSE file system (test/nfsfs) with this profile (fsx, local), one mount per broker; needs root and /dev/fuse")
	fs.StringVar(&c.FSxControl, "fsx-control", c.FSxControl, "attach: base URL of an nfsfs control handler (storage faults)")
	fs.DurationVar(&c.StorageFor, "storage-for", c.StorageFor, "how long a storage fault lasts")
	fs.DurationVar(&c.SlowBy, "slow-by", c.SlowBy, "storage-slow: extra latency of every operation of the slow mount")
	fs.BoolVar(&c.JSON, "json", c.JSON, "print the report as JSON")
	fs.StringVar(&c.PNG, "png", c.PNG, "write a PNG timeline (throughput, latency p99, unavailable partitions; faults marked)")
}

// Validate checks the settings and fills the schedule.
func (c *Config) Validate() error {
	switch {
	case c.Partitions < 1 || c.Producers < 1 || c.Rate <= 0:
		return errors.New("chaos: need --partitions, --producers >= 1 and --rate > 0")
	case c.RecordSize < 32:
		return errors.New("chaos: --record-size must be at least 32 (the unique value)")
	case c.Duration <= 0 || c.Interval <= 0:
		return errors.New("chaos: --duration and --interval must be > 0")
	case c.Txn && (c.TxnWriters < 1 || c.TxnRecords < 1):
		return errors.New("chaos: --txn needs --txn-writers and --txn-records >= 1")
	case c.GroupProtocol != "" && c.GroupProtocol != "classic" && c.GroupProtocol != "consumer":
		return fmt.Errorf("chaos: --group-protocol %q: want classic or consumer", c.GroupProtocol)
	case c.Compacted && (c.CompactedKeys < 1 || c.CompactedRate <= 0):
		return errors.New("chaos: --compacted needs --compacted-keys >= 1 and --compacted-rate > 0")
	case c.Share && (c.ShareMembers < 1 || c.ShareRate <= 0):
		return errors.New("chaos: --share needs --share-members >= 1 and --share-rate > 0")
	}
	if _, ok := nfsfs.ProfileByName(c.FSx); !ok {
		return fmt.Errorf("chaos: --fsx %q: want fsx or local", c.FSx)
	}
	if c.Random {
		fs, err := randomFaults(*c)
		if err != nil {
			return err
		}
		c.Faults = append(c.Faults, fs...)
	}
	for _, f := range c.Faults {
		if txnFault(f.Kind) && !c.Txn {
			return fmt.Errorf("chaos: fault %v needs --txn", f)
		}
		if f.At >= c.Duration {
			return fmt.Errorf("chaos: fault %v is after the end of the load (--duration %v)", f, c.Duration)
		}
	}
	return nil
}
