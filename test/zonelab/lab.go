package zonelab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weir-io/weir/test/nfsfs"
)

// Control names the control namespace (controllers, object store) wherever a zone name
// is expected: Namespace, Command, DialContext and the ends of a Veth.
const Control = "control"

// Fixed ports: every process has an address of its own, and every lab its own namespaces,
// so nothing collides and no port has to be picked.
const (
	KafkaPort      = 9092
	MetricsPort    = 9644
	GossipPort     = 7946
	RaftPort       = 9301
	ControllerPort = 9401
)

// Config describes a lab.
type Config struct {
	// Bin is the weir binary (needed when there are controllers or brokers).
	Bin string
	// Dir holds the processes' data and logs (<name>.log), the shared WAL root
	// (<Dir>/wal) and the localfs object store (<Dir>/objects).
	Dir string
	// Zones are the zone names (default a, b, c): at most 13 characters of [a-z0-9-],
	// not "control".
	Zones []string
	// Prefix starts every namespace name (<Prefix><zone>, <Prefix>control); default
	// "weir-<6 random hex>-". Two labs must not share one.
	Prefix string
	// Controllers in the control namespace (default 0: none; no brokers then either).
	Controllers int
	// BrokersPerZone brokers in each zone namespace (default 0).
	BrokersPerZone int
	// BrokerArgs and ControllerArgs are appended to every broker's / controller's flags
	// (a flag given twice: the last one wins).
	BrokerArgs, ControllerArgs []string
	// Balance runs the controllers' balancer. Off by default: a measurement wants the
	// leaders where placement put them, not moving under the load.
	Balance bool
	// LogLevel of every process (default info).
	LogLevel string
	// TagClientID is the client.id of a zone-tagged client (default "weir_az=<zone>").
	TagClientID func(zone string) string
	// FSx, if set, serves the WAL root (<Dir>/wal) through test/nfsfs with this model:
	// each broker mounts it separately (<Dir>/mnt-broker-<i>) as its --wal-root, as each
	// broker host mounts FSx. The FUSE server runs in the calling process, outside
	// every namespace: a zone cut off by Partition still reaches the file system.
	FSx *nfsfs.Model
}

// Lab is a running multi-zone network with its processes.
type Lab struct {
	cfg   Config
	lock  *os.File
	zones []string // the zones, in order; index i has subnet 10.77.(i+1).0/24

	Controllers []*Proc
	Brokers     []*Proc

	closeOnce sync.Once
	closeErr  error

	benchOnce   sync.Once
	benchTagged bool

	mounts []*nfsfs.Mount
}

var zoneName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,12}$`)

// Start cleans up what crashed earlier runs left behind (CleanupStale), builds the
// network (see the package comment), then starts the controllers and the brokers and
// waits until each answers /readyz. On error everything it made is removed again.
func Start(ctx context.Context, cfg Config) (*Lab, error) {
	if len(cfg.Zones) == 0 {
		cfg.Zones = []string{"a", "b", "c"}
	}
	if len(cfg.Zones) > 250 {
		return nil, errors.New("zonelab: at most 250 zones")
	}
	seen := map[string]bool{}
	for _, z := range cfg.Zones {
		if !zoneName.MatchString(z) || z == Control {
			return nil, fmt.Errorf("zonelab: bad zone name %q (1-13 of [a-z0-9-], not %q)", z, Control)
		}
		if seen[z] {
			return nil, fmt.Errorf("zonelab: zone %q twice", z)
		}
		seen[z] = true
	}
	if cfg.BrokersPerZone > 0 && cfg.Controllers < 1 {
		return nil, errors.New("zonelab: brokers need at least one controller")
	}
	if cfg.BrokersPerZone > 200 || cfg.Controllers > 200 {
		return nil, errors.New("zonelab: at most 200 brokers per zone and 200 controllers")
	}
	if (cfg.Controllers > 0 || cfg.BrokersPerZone > 0) && cfg.Bin == "" {
		return nil, errors.New("zonelab: Config.Bin (the weir binary) is needed to run processes")
	}
	if cfg.Dir == "" {
		return nil, errors.New("zonelab: Config.Dir is needed")
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "info"
	}
	if cfg.TagClientID == nil {
		cfg.TagClientID = func(zone string) string { return "weir_az=" + zone }
	}
	if cfg.Prefix == "" {
		var b [3]byte
		rand.Read(b[:])
		cfg.Prefix = "weir-" + hex.EncodeToString(b[:]) + "-"
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	CleanupStale() // best effort: leftovers of others never stop this lab

	lock, err := tryLock(cfg.Prefix)
	if errors.Is(err, errLocked) {
		return nil, fmt.Errorf("zonelab: prefix %q is used by a running lab", cfg.Prefix)
	}
	if err != nil {
		return nil, fmt.Errorf("zonelab: lock: %w", err)
	}
	l := &Lab{cfg: cfg, lock: lock, zones: cfg.Zones}
	// Namespaces of this prefix left by an earlier run in this same process (a Close
	// that never ran): ours now, so remove them.
	if err := cleanupNamespaces(cfg.Prefix); err != nil {
		l.Close()
		return nil, err
	}
	if err := l.buildNetwork(); err != nil {
		l.Close()
		return nil, err
	}
	if err := l.startProcesses(ctx); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Prefix is the lab's namespace name prefix.
func (l *Lab) Prefix() string { return l.cfg.Prefix }

// Dir is where the processes keep their data and logs.
func (l *Lab) Dir() string { return l.cfg.Dir }

// Zones are the zone names.
func (l *Lab) Zones() []string { return append([]string(nil), l.zones...) }

// Namespace is the network namespace of zone (or of Control).
func (l *Lab) Namespace(zone string) string { return l.cfg.Prefix + zone }

// TagClientID is the client.id a zone-tagged client in zone uses.
func (l *Lab) TagClientID(zone string) string { return l.cfg.TagClientID(zone) }

func (l *Lab) zoneIndex(zone string) int {
	for i, z := range l.zones {
		if z == zone {
			return i
		}
	}
	return -1
}

func (l *Lab) checkZone(zone string) error {
	if zone != Control && l.zoneIndex(zone) < 0 {
		return fmt.Errorf("zonelab: no zone %q", zone)
	}
	return nil
}

// subnet is the /24 of zone (10.77.0.0/24 for Control).
func (l *Lab) subnet(zone string) string {
	if zone == Control {
		return "10.77.0"
	}
	return fmt.Sprintf("10.77.%d", l.zoneIndex(zone)+1)
}

// HostAddr is the zone's (or Control's) own address, x.x.x.1: the source address of
// every connection opened in the namespace towards another one.
func (l *Lab) HostAddr(zone string) string { return l.subnet(zone) + ".1" }

// ZoneCIDRs is every zone's subnet in the brokers' --zone-cidrs form
// ("a=10.77.1.0/24,b=10.77.2.0/24,..."), for a lab whose brokers should tell untagged
// clients' zones by their source address. Clients of a zone connect from its .1.
func (l *Lab) ZoneCIDRs() string {
	var parts []string
	for _, z := range l.zones {
		parts = append(parts, z+"="+l.subnet(z)+".0/24")
	}
	return strings.Join(parts, ",")
}

// nodeAddr is the address of the k-th process (from 1) in zone: x.x.x.(10+k).
func (l *Lab) nodeAddr(zone string, k int) string { return fmt.Sprintf("%s.%d", l.subnet(zone), 10+k) }

// vethName is the interface in the namespace of one end that leads to the other end.
func vethName(to string) string { return "x-" + to }

// ends are the namespaces' zone names, Control first.
func (l *Lab) ends() []string { return append([]string{Control}, l.zones...) }

func (l *Lab) buildNetwork() error {
	for _, z := range l.ends() {
		ns := l.Namespace(z)
		if _, err := ip("netns", "add", ns); err != nil {
			return err
		}
		// No IPv6: its neighbour discovery and router solicitations would only add noise
		// to the veth counters.
		err := inNetns(ns, func() error {
			for _, k := range []string{"all", "default"} {
				if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/disable_ipv6", []byte("1"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("zonelab: %s: disabling IPv6: %w", ns, err)
		}
		if _, err := ip("-n", ns, "link", "set", "lo", "up"); err != nil {
			return err
		}
		// Every address of the namespace sits on lo: traffic between two of them never
		// leaves the namespace, so it touches no veth.
		addrs := []string{l.HostAddr(z)}
		n := l.cfg.BrokersPerZone
		if z == Control {
			n = l.cfg.Controllers
		}
		for k := 1; k <= n; k++ {
			addrs = append(addrs, l.nodeAddr(z, k))
		}
		for _, a := range addrs {
			if _, err := ip("-n", ns, "addr", "add", a+"/32", "dev", "lo"); err != nil {
				return err
			}
		}
	}
	// A full mesh of point-to-point veth pairs: one per pair of namespaces, so each
	// veth's counters are exactly the bytes between its two ends. The control namespace
	// does not forward, so zones reach each other only over their own veth.
	ends := l.ends()
	for i, a := range ends {
		for _, b := range ends[i+1:] {
			if _, err := ip("link", "add", vethName(b), "netns", l.Namespace(a), "type", "veth",
				"peer", "name", vethName(a), "netns", l.Namespace(b)); err != nil {
				return err
			}
			for _, e := range [][2]string{{a, b}, {b, a}} {
				ns, dev := l.Namespace(e[0]), vethName(e[1])
				if _, err := ip("-n", ns, "link", "set", dev, "up"); err != nil {
					return err
				}
				if _, err := ip("-n", ns, "route", "add", l.subnet(e[1])+".0/24", "dev", dev, "src", l.HostAddr(e[0])); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Proc is one process of the lab.
type Proc struct {
	Name    string
	ID      int
	Zone    string // the zone, or Control for controllers
	NS      string
	Addr    string // brokers: the Kafka listener; controllers: the API
	Metrics string // /metrics, /healthz, /readyz

	lab  *Lab
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func (l *Lab) startProcesses(ctx context.Context) error {
	var peers, apis []string
	for i := 1; i <= l.cfg.Controllers; i++ {
		a := l.nodeAddr(Control, i)
		peers = append(peers, fmt.Sprintf("%d=%s:%d/%s:%d", i, a, RaftPort, a, ControllerPort))
		apis = append(apis, fmt.Sprintf("%s:%d", a, ControllerPort))
	}
	for i := 1; i <= l.cfg.Controllers; i++ {
		a := l.nodeAddr(Control, i)
		p := &Proc{Name: fmt.Sprintf("controller-%d", i), ID: i, Zone: Control, NS: l.Namespace(Control),
			Addr: apis[i-1], Metrics: fmt.Sprintf("%s:%d", a, MetricsPort), lab: l}
		p.args = append([]string{"controller", "--node-id", fmt.Sprint(i),
			"--data-dir", filepath.Join(l.cfg.Dir, p.Name), "--peers", strings.Join(peers, ","),
			"--metrics", p.Metrics, "--balance=" + fmt.Sprint(l.cfg.Balance), "--log-level", l.cfg.LogLevel}, l.cfg.ControllerArgs...)
		l.Controllers = append(l.Controllers, p)
	}
	// Broker ids go round the zones: broker 1 in the first zone, 2 in the second, ...
	var gossip []string
	type slot struct {
		zone string
		k    int
	}
	var slots []slot
	for k := 1; k <= l.cfg.BrokersPerZone; k++ {
		for _, z := range l.zones {
			slots = append(slots, slot{z, k})
			gossip = append(gossip, fmt.Sprintf("%s:%d", l.nodeAddr(z, k), GossipPort))
		}
	}
	for i, s := range slots {
		a := l.nodeAddr(s.zone, s.k)
		p := &Proc{Name: fmt.Sprintf("broker-%d", i+1), ID: i + 1, Zone: s.zone, NS: l.Namespace(s.zone),
			Addr: fmt.Sprintf("%s:%d", a, KafkaPort), Metrics: fmt.Sprintf("%s:%d", a, MetricsPort), lab: l}
		walRoot, err := l.walRoot(p.Name)
		if err != nil {
			return err
		}
		p.args = append([]string{"broker", "--node-id", fmt.Sprint(i + 1), "--rack", s.zone,
			"--listen", p.Addr, "--metrics", p.Metrics, "--controllers", strings.Join(apis, ","),
			"--data-dir", filepath.Join(l.cfg.Dir, p.Name), "--wal-root", walRoot,
			"--object-store", "localfs", "--object-dir", filepath.Join(l.cfg.Dir, "objects"),
			"--gossip-addr", gossip[i], "--gossip-seeds", strings.Join(gossip, ","),
			// Closing a lab is not a rolling restart: no hand-offs on SIGTERM.
			"--drain-timeout", "0",
			"--log-level", l.cfg.LogLevel}, l.cfg.BrokerArgs...)
		l.Brokers = append(l.Brokers, p)
	}
	all := append(append([]*Proc(nil), l.Controllers...), l.Brokers...)
	for _, p := range all {
		if err := p.Start(); err != nil {
			return err
		}
	}
	for _, p := range all {
		if err := p.WaitReady(ctx, 2*time.Minute); err != nil {
			return err
		}
	}
	return nil
}

// Bootstrap is the Kafka addresses of zone's brokers.
func (l *Lab) Bootstrap(zone string) []string {
	var out []string
	for _, b := range l.Brokers {
		if b.Zone == zone {
			out = append(out, b.Addr)
		}
	}
	return out
}

// ControllerAPIs are the controllers' API addresses (in the control namespace).
func (l *Lab) ControllerAPIs() []string {
	var out []string
	for _, c := range l.Controllers {
		out = append(out, c.Addr)
	}
	return out
}

// Command returns a command that runs argv inside zone's namespace (`ip netns exec`,
// which execs argv: the command's process is argv's). It is killed when ctx ends, when
// this process dies (SIGKILL as parent-death signal), and by Close.
func (l *Lab) Command(ctx context.Context, zone string, argv ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", l.Namespace(zone)}, argv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	if err := l.checkZone(zone); err != nil {
		cmd.Err = err
	}
	return cmd
}

// RunInZone runs argv inside zone's namespace and returns its standard output; the
// error includes its standard error.
func (l *Lab) RunInZone(ctx context.Context, zone string, argv ...string) ([]byte, error) {
	cmd := l.Command(ctx, zone, argv...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("zonelab: %s in zone %s: %w: %s", strings.Join(argv, " "), zone, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// DialContext returns a dial function whose connections start in zone's namespace, for
// clients running in this process (kgo.Dialer, http.Transport.DialContext). Addresses
// must be literal IPs.
func (l *Lab) DialContext(zone string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	ns := l.Namespace(zone)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if err := l.checkZone(zone); err != nil {
			return nil, err
		}
		return dialIn(ctx, ns, network, addr)
	}
}

// Listen opens a listener inside zone's namespace.
func (l *Lab) Listen(zone, network, addr string) (net.Listener, error) {
	if err := l.checkZone(zone); err != nil {
		return nil, err
	}
	var ln net.Listener
	err := inNetns(l.Namespace(zone), func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	})
	return ln, err
}

// HTTPClient is an HTTP client whose connections start in zone's namespace (to scrape
// /metrics of the lab's processes).
func (l *Lab) HTTPClient(zone string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: l.DialContext(zone), DisableKeepAlives: true}}
}

// Close stops the brokers, then the controllers (SIGTERM, SIGKILL after a grace period),
// kills whatever else still runs in the lab's namespaces, and deletes the namespaces
// (and with them every veth). The data directory stays.
func (l *Lab) Close() error {
	l.closeOnce.Do(func() {
		var wg sync.WaitGroup
		for _, p := range l.Brokers {
			wg.Add(1)
			go func() { defer wg.Done(); p.Stop(10 * time.Second) }()
		}
		wg.Wait()
		for _, p := range l.Controllers {
			wg.Add(1)
			go func() { defer wg.Done(); p.Stop(5 * time.Second) }()
		}
		wg.Wait()
		if l.cfg.FSx != nil {
			l.cfg.FSx.Thaw() // a frozen server would hold the unmounts
		}
		for _, m := range l.mounts {
			if err := m.Close(); err != nil {
				l.closeErr = errors.Join(l.closeErr, err)
			}
		}
		l.closeErr = errors.Join(l.closeErr, cleanupNamespaces(l.cfg.Prefix))
		if err := os.Remove(l.lock.Name()); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.closeErr = errors.Join(l.closeErr, err)
		}
		l.lock.Close()
	})
	return l.closeErr
}

// Start runs the process (again) in its namespace, appending its output to
// <Dir>/<name>.log.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("zonelab: %s is running", p.Name)
		}
	}
	f, err := os.OpenFile(filepath.Join(p.lab.cfg.Dir, p.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", p.NS, p.lab.cfg.Bin}, p.args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("zonelab: starting %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		cmd.Wait()
		f.Close()
		close(done)
	}()
	return nil
}

// WaitReady waits until the process answers /readyz.
func (p *Proc) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	cl := p.lab.HTTPClient(p.Zone)
	cl.Timeout = time.Second
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	for {
		resp, err := cl.Get("http://" + p.Metrics + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("zonelab: %s exited while starting (see %s)", p.Name, p.LogPath())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zonelab: %s not ready after %v (see %s)", p.Name, timeout, p.LogPath())
		}
	}
}

// Signal sends sig to the running process.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return errors.New("zonelab: not running")
	}
	return p.cmd.Process.Signal(sig)
}

// Stop asks the process to shut down (SIGTERM; a paused one is resumed first) and kills
// it after grace.
func (p *Proc) Stop(grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGCONT)
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
}

// LogPath is the process's log file.
func (p *Proc) LogPath() string { return filepath.Join(p.lab.cfg.Dir, p.Name+".log") }

// Log returns the process's log so far.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.LogPath())
	return string(b)
}
