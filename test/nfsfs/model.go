package nfsfs

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Op is a class of server operation (an NFS RPC the client would send).
type Op uint8

const (
	OpMeta   Op = 1 << iota // LOOKUP, GETATTR, OPEN (close-to-open revalidation), CREATE, REMOVE, RENAME, LINK (hard link), MKDIR, READDIR
	OpRead                  // READ (a page cache miss)
	OpWrite                 // WRITE (the mount's buffered data sent to the server)
	OpCommit                // COMMIT (fsync, fdatasync, and the flush on close)
	OpAll    = OpMeta | OpRead | OpWrite | OpCommit
)

var opNames = map[string]Op{"meta": OpMeta, "read": OpRead, "write": OpWrite, "commit": OpCommit, "all": OpAll}

// ParseOps parses "write,commit" (or "all") into an Op mask.
func ParseOps(s string) (Op, bool) {
	var m Op
	for _, f := range strings.Split(s, ",") {
		o, ok := opNames[strings.TrimSpace(f)]
		if !ok {
			return 0, false
		}
		m |= o
	}
	return m, m != 0
}

// Latency is a log-normal service time given by its median and 99th percentile; the
// tail beyond p99 follows from them (p99.9 = P50·exp(3.09σ), σ = ln(P99/P50)/2.326).
type Latency struct{ P50, P99 time.Duration }

func (l Latency) sample(r *rand.Rand) time.Duration {
	if l.P50 <= 0 {
		return 0
	}
	sigma := 0.0
	if l.P99 > l.P50 {
		sigma = math.Log(float64(l.P99)/float64(l.P50)) / 2.326
	}
	d := time.Duration(float64(l.P50) * math.Exp(sigma*r.NormFloat64()))
	return min(d, 50*l.P50) // no sample beyond 50× the median: a freeze is a fault, not a tail
}

// Profile is the server's service model: per-operation latency and a throughput cap
// shared by every mount (FSx's provisioned throughput capacity).
type Profile struct {
	Name                      string
	Meta, Read, Write, Commit Latency
	// Throughput caps the bytes read and written by all mounts together, per second
	// (0: no cap). Burst is the token bucket's depth (default Throughput/10).
	Throughput, Burst int64
}

// Local is no model at all: the backing directory's own speed.
var Local = Profile{Name: "local"}

// FSx approximates FSx for NetApp ONTAP Multi-AZ (SSD tier, client in the same region)
// as seen by one NFS client; sources in doc.go. The throughput cap is the smallest
// provisionable throughput capacity (128 MB/s).
var FSx = Profile{
	Name:       "fsx",
	Meta:       Latency{P50: 300 * time.Microsecond, P99: 1500 * time.Microsecond},
	Read:       Latency{P50: 500 * time.Microsecond, P99: 3 * time.Millisecond},
	Write:      Latency{P50: 500 * time.Microsecond, P99: 3 * time.Millisecond},
	Commit:     Latency{P50: 1 * time.Millisecond, P99: 6 * time.Millisecond},
	Throughput: 128 << 20,
}

// ProfileByName returns Local or FSx.
func ProfileByName(name string) (Profile, bool) {
	switch name {
	case "", "local":
		return Local, true
	case "fsx":
		return FSx, true
	}
	return Profile{}, false
}

// Model is the server: its profile, the shared throughput bucket and the faults. One
// Model is shared by every mount of a backing directory; its methods are safe for
// concurrent use and take effect on operations that start after the call.
type Model struct {
	mu      sync.Mutex
	prof    Profile
	rnd     *rand.Rand
	tokens  float64
	refill  time.Time
	frozen  chan struct{} // closed at thaw; nil when not frozen
	errs    map[Op]syscall.Errno
	slow    map[string]time.Duration // extra latency per mount name
	commits []time.Duration          // service time of every COMMIT (model latency and queueing)
	ops     map[Op]int64
	bytes   map[Op]int64
}

// NewModel returns a server model with profile p.
func NewModel(p Profile) *Model {
	return &Model{prof: p, rnd: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1)),
		errs: map[Op]syscall.Errno{}, slow: map[string]time.Duration{}, ops: map[Op]int64{}, bytes: map[Op]int64{}}
}

// SetProfile replaces the latency and throughput model.
func (m *Model) SetProfile(p Profile) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prof = p
}

// Profile returns the current profile.
func (m *Model) Profile() Profile {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.prof
}

// Freeze stops every operation of every mount until Thaw (a Multi-AZ failover: NFS on a
// hard mount blocks, it does not fail). Operations already past the freeze check finish.
func (m *Model) Freeze() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.frozen == nil {
		m.frozen = make(chan struct{})
	}
}

// Thaw ends a freeze.
func (m *Model) Thaw() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.frozen != nil {
		close(m.frozen)
		m.frozen = nil
	}
}

// Frozen reports whether the server is frozen.
func (m *Model) Frozen() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.frozen != nil
}

// Fail makes every operation of the classes in ops fail with errno (EIO, ENOSPC,
// ESTALE...) until Clear; errno 0 removes the fault for those classes.
func (m *Model) Fail(ops Op, errno syscall.Errno) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for o := OpMeta; o <= OpCommit; o <<= 1 {
		if ops&o == 0 {
			continue
		}
		if errno == 0 {
			delete(m.errs, o)
		} else {
			m.errs[o] = errno
		}
	}
}

// Slow adds extra latency to every operation of the named mount (0 removes it).
func (m *Model) Slow(mount string, extra time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if extra <= 0 {
		delete(m.slow, mount)
	} else {
		m.slow[mount] = extra
	}
}

// Clear removes every fault: thaws, and clears errors and slow mounts.
func (m *Model) Clear() {
	m.Thaw()
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.errs)
	clear(m.slow)
}

// CommitStats returns the quantiles q (0..1) of the COMMIT service times so far and
// how many there were: the server's own fsync latency, before FUSE and the client.
func (m *Model) CommitStats(q ...float64) ([]time.Duration, int) {
	m.mu.Lock()
	s := slices.Clone(m.commits)
	m.mu.Unlock()
	slices.Sort(s)
	out := make([]time.Duration, len(q))
	for i, x := range q {
		if len(s) > 0 {
			out[i] = s[min(len(s)-1, int(x*float64(len(s))))]
		}
	}
	return out, len(s)
}

// ResetStats forgets the recorded COMMIT times and operation counts.
func (m *Model) ResetStats() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.commits = nil
	clear(m.ops)
	clear(m.bytes)
}

// Bytes returns how many bytes operations of class o moved (READ, WRITE).
func (m *Model) Bytes(o Op) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bytes[o]
}

// Ops returns how many operations of class o the server served.
func (m *Model) Ops(o Op) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ops[o]
}

// do serves one operation of class op moving n bytes for mount: it waits out a freeze,
// fails with an injected error, waits for throughput tokens, then sleeps the sampled
// latency (plus the mount's slowness).
func (m *Model) do(ctx context.Context, mount string, op Op, n int) syscall.Errno {
	start := time.Now()
	for {
		m.mu.Lock()
		fr := m.frozen
		m.mu.Unlock()
		if fr == nil {
			break
		}
		if errno := waitThaw(ctx, fr); errno != 0 {
			return errno
		}
	}
	m.mu.Lock()
	m.ops[op]++
	if e := m.errs[op]; e != 0 {
		m.mu.Unlock()
		return e
	}
	m.bytes[op] += int64(n)
	p := m.prof
	var lat time.Duration
	switch op {
	case OpMeta:
		lat = p.Meta.sample(m.rnd)
	case OpRead:
		lat = p.Read.sample(m.rnd)
	case OpWrite:
		lat = p.Write.sample(m.rnd)
	case OpCommit:
		lat = p.Commit.sample(m.rnd)
	}
	lat += m.slow[mount]
	var wait time.Duration
	if p.Throughput > 0 && n > 0 {
		burst := p.Burst
		if burst <= 0 {
			burst = p.Throughput / 10
		}
		now := time.Now()
		m.tokens = min(float64(burst), m.tokens+now.Sub(m.refill).Seconds()*float64(p.Throughput))
		m.refill = now
		m.tokens -= float64(n)
		if m.tokens < 0 {
			wait = time.Duration(-m.tokens / float64(p.Throughput) * float64(time.Second))
		}
	}
	m.mu.Unlock()
	time.Sleep(wait + lat) // on purpose: this is the modelled server's service time
	if op == OpCommit {
		m.mu.Lock()
		m.commits = append(m.commits, time.Since(start))
		m.mu.Unlock()
	}
	return 0
}

// waitThaw blocks until fr is closed. A FUSE request is interrupted by any signal to
// its caller (Go's runtime sends SIGURG all the time), but an NFS hard mount only lets a
// fatal signal end a blocked call: so an interrupt ends the wait only once the caller
// is dying (SIGKILL pending, or gone).
func waitThaw(ctx context.Context, fr chan struct{}) syscall.Errno {
	var pid uint32
	if fc, ok := ctx.(*fuse.Context); ok {
		pid = fc.Caller.Pid
	}
	done := ctx.Done()
	for {
		select {
		case <-fr:
			return 0
		case <-done:
			done = nil // interrupted: from now on, poll whether the caller dies
		case <-time.After(100 * time.Millisecond):
		}
		if done == nil && pid != 0 && dying(pid) {
			return syscall.EINTR
		}
	}
}

// dying reports whether thread pid is gone or has SIGKILL pending.
func dying(pid uint32) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/status")
	if err != nil {
		return true
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok || (k != "SigPnd" && k != "ShdPnd") {
			continue
		}
		if x, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && x&(1<<(syscall.SIGKILL-1)) != 0 {
			return true
		}
	}
	return strings.Contains(string(b), "State:\tZ") || strings.Contains(string(b), "State:\tX")
}
