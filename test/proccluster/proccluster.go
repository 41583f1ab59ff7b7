// Package proccluster runs Weir controllers and brokers as separate processes of one
// binary, as separate hosts would run them: the brokers share a WAL root (the FSx mount in
// production) and a local object store directory. `weir bench failover` and `weir chaos`
// measure and break clusters run by it. Each broker reaches the controllers through
// proxies of its own, so a broker can be cut off from the controllers (but not from
// clients or other brokers) and healed again.
package proccluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weir-io/weir/test/nfsfs"
)

// Config describes a cluster to start.
type Config struct {
	Bin         string // the weir binary
	Dir         string
	Controllers int
	Brokers     int
	Zones       []string // broker i (from 1) is in Zones[(i-1) mod len]; default a, b, c
	// BrokerArgs and ControllerArgs are appended to every broker's / controller's flags.
	BrokerArgs, ControllerArgs []string
	// LogLevel of every process (default info).
	LogLevel string
	// FSx, if set, serves the shared WAL root (<Dir>/wal) through test/nfsfs with this
	// server model, and every broker mounts it separately at <Dir>/mnt-broker-<i> as
	// its --wal-root, as each broker host mounts FSx over NFS. Needs root and /dev/fuse.
	FSx *nfsfs.Model
}

// Cluster is a running set of processes.
type Cluster struct {
	cfg  Config
	apis []string // controller API addresses

	Controllers []*Proc
	Brokers     []*Proc
	proxies     [][]*proxy // per broker, one per controller
	mounts      []*nfsfs.Mount
}

// Proc is one process (running or not) and how to start it again.
type Proc struct {
	Name    string
	ID      int32
	Zone    string // brokers; controller i is in Zones[(i-1) mod len] too
	Kafka   string // brokers: the Kafka listener
	Metrics string // the /metrics listener
	API     string // controllers: the API address

	dir  string
	bin  string
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// portPicker hands out distinct free loopback ports: it keeps each listener open until
// release, so the kernel cannot give the same port twice.
type portPicker struct{ lns []net.Listener }

func (pp *portPicker) next() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	pp.lns = append(pp.lns, ln)
	return ln.Addr().String(), nil
}

func (pp *portPicker) release() {
	for _, ln := range pp.lns {
		ln.Close()
	}
	pp.lns = nil
}

// Start starts the controllers, then the brokers, and waits until every process reports
// ready on its /readyz.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if len(cfg.Zones) == 0 {
		cfg.Zones = []string{"a", "b", "c"}
	}
	if cfg.LogLevel == "" {
		cfg.LogLevel = "info"
	}
	if cfg.Controllers < 1 || cfg.Brokers < 1 {
		return nil, errors.New("proccluster: need at least one controller and one broker")
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg}
	pp := &portPicker{}
	defer pp.release()
	var peers []string
	for i := 1; i <= cfg.Controllers; i++ {
		raft, err := pp.next()
		if err != nil {
			return nil, err
		}
		api, err := pp.next()
		if err != nil {
			return nil, err
		}
		peers = append(peers, fmt.Sprintf("%d=%s/%s", i, raft, api))
		c.apis = append(c.apis, api)
	}
	for i := 1; i <= cfg.Controllers; i++ {
		m, err := pp.next()
		if err != nil {
			return nil, err
		}
		args := append([]string{"controller", "--node-id", fmt.Sprint(i),
			"--data-dir", filepath.Join(cfg.Dir, fmt.Sprintf("controller-%d", i)),
			"--peers", strings.Join(peers, ","), "--metrics", m, "--log-level", cfg.LogLevel}, cfg.ControllerArgs...)
		c.Controllers = append(c.Controllers, &Proc{Name: fmt.Sprintf("controller-%d", i), ID: int32(i), Zone: cfg.Zones[(i-1)%len(cfg.Zones)], Metrics: m, API: c.apis[i-1],
			dir: cfg.Dir, bin: cfg.Bin, args: args})
	}
	var gossip []string
	for i := 0; i < cfg.Brokers; i++ {
		g, err := pp.next()
		if err != nil {
			return nil, err
		}
		gossip = append(gossip, g)
	}
	for i := 1; i <= cfg.Brokers; i++ {
		kafka, err := pp.next()
		if err != nil {
			return nil, err
		}
		m, err := pp.next()
		if err != nil {
			return nil, err
		}
		var via []string
		var pxs []*proxy
		for _, api := range c.apis {
			px, err := newProxy(api)
			if err != nil {
				c.Close()
				return nil, err
			}
			pxs = append(pxs, px)
			via = append(via, px.addr())
		}
		c.proxies = append(c.proxies, pxs)
		zone := cfg.Zones[(i-1)%len(cfg.Zones)]
		walRoot, err := c.walRoot(fmt.Sprintf("broker-%d", i))
		if err != nil {
			c.Close()
			return nil, err
		}
		args := append([]string{"broker", "--node-id", fmt.Sprint(i), "--rack", zone,
			"--listen", kafka, "--metrics", m, "--controllers", strings.Join(via, ","),
			"--data-dir", filepath.Join(cfg.Dir, fmt.Sprintf("broker-%d", i)), "--wal-root", walRoot,
			"--gossip-addr", gossip[i-1], "--gossip-seeds", strings.Join(gossip, ","), "--log-level", cfg.LogLevel}, cfg.BrokerArgs...)
		if cfg.FSx != nil {
			// The object store stands for S3, not for FSx: kept off the lab file
			// system (by default it would sit in the WAL root). Before BrokerArgs,
			// so a caller's --object-dir wins.
			args = append(args[:len(args)-len(cfg.BrokerArgs):len(args)-len(cfg.BrokerArgs)], append([]string{"--object-dir", filepath.Join(cfg.Dir, "objects")}, cfg.BrokerArgs...)...)
		}
		c.Brokers = append(c.Brokers, &Proc{Name: fmt.Sprintf("broker-%d", i), ID: int32(i), Zone: zone, Kafka: kafka, Metrics: m,
			dir: cfg.Dir, bin: cfg.Bin, args: args})
	}
	pp.release()
	for _, p := range append(append([]*Proc(nil), c.Controllers...), c.Brokers...) {
		if err := p.Start(); err != nil {
			c.Close()
			return nil, err
		}
	}
	for _, p := range append(append([]*Proc(nil), c.Controllers...), c.Brokers...) {
		if err := p.WaitReady(ctx, 2*time.Minute); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// walRoot is the --wal-root of broker process name: the shared directory, or under FSx
// a mount of it of the process's own.
func (c *Cluster) walRoot(name string) (string, error) {
	shared := filepath.Join(c.cfg.Dir, "wal")
	if c.cfg.FSx == nil {
		return shared, nil
	}
	if err := os.MkdirAll(shared, 0o755); err != nil {
		return "", err
	}
	m, err := nfsfs.New(filepath.Join(c.cfg.Dir, "mnt-"+name), shared, c.cfg.FSx, nfsfs.Options{Name: name})
	if err != nil {
		return "", err
	}
	c.mounts = append(c.mounts, m)
	return m.Dir, nil
}

// FSx is the file system model (nil without FSx).
func (c *Cluster) FSx() *nfsfs.Model { return c.cfg.FSx }

// Zone returns the brokers and the controllers of zone z.
func (c *Cluster) Zone(z string) (brokers, controllers []*Proc) {
	for _, p := range c.Brokers {
		if p.Zone == z {
			brokers = append(brokers, p)
		}
	}
	for _, p := range c.Controllers {
		if p.Zone == z {
			controllers = append(controllers, p)
		}
	}
	return brokers, controllers
}

// Zones are the cluster's zones.
func (c *Cluster) Zones() []string { return append([]string(nil), c.cfg.Zones...) }

// Dir is where the processes keep their data and logs (<name>.log).
func (c *Cluster) Dir() string { return c.cfg.Dir }

// ControllerAPIs are the controllers' API addresses.
func (c *Cluster) ControllerAPIs() []string { return append([]string(nil), c.apis...) }

// Bootstrap is the brokers' Kafka addresses.
func (c *Cluster) Bootstrap() []string {
	var out []string
	for _, b := range c.Brokers {
		out = append(out, b.Kafka)
	}
	return out
}

// Broker returns broker id (from 1).
func (c *Cluster) Broker(id int32) *Proc { return c.Brokers[id-1] }

// Cut cuts broker id off from the controllers (its proxies drop every connection and
// refuse new ones); clients and the other brokers still reach it.
func (c *Cluster) Cut(id int32) {
	for _, px := range c.proxies[id-1] {
		px.cut(true)
	}
}

// Heal undoes Cut.
func (c *Cluster) Heal(id int32) {
	for _, px := range c.proxies[id-1] {
		px.cut(false)
	}
}

// Close stops every process (SIGTERM, then SIGKILL after a grace period) and the proxies.
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for _, p := range c.Brokers {
		wg.Add(1)
		go func() { defer wg.Done(); p.Stop(10 * time.Second) }()
	}
	wg.Wait()
	for _, p := range c.Controllers {
		wg.Add(1)
		go func() { defer wg.Done(); p.Stop(5 * time.Second) }()
	}
	wg.Wait()
	for _, pxs := range c.proxies {
		for _, px := range pxs {
			px.close()
		}
	}
	if c.cfg.FSx != nil {
		c.cfg.FSx.Thaw() // a frozen server would hold the unmounts
	}
	for _, m := range c.mounts {
		m.Close()
	}
}

// Start runs the process (again), appending its output to <dir>/<name>.log.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("proccluster: %s is running", p.Name)
		}
	}
	f, err := os.OpenFile(filepath.Join(p.dir, p.Name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("proccluster: starting %s: %w", p.Name, err)
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

// Running reports whether the process is running (paused counts as running).
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// WaitReady waits until the process answers /readyz.
func (p *Proc) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	cl := http.Client{Timeout: time.Second}
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
			// The directory goes with the test: the error carries the log's end.
			return fmt.Errorf("proccluster: %s exited while starting (see %s.log); its log ends:\n%s", p.Name, p.Name, logEnd(p.Log(), 20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("proccluster: %s not ready after %v (see %s.log)", p.Name, timeout, p.Name)
		}
	}
}

// Signal sends sig to the running process.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return errors.New("proccluster: not running")
	}
	return p.cmd.Process.Signal(sig)
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGCONT) // a paused process dies only once resumed
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Pause stops the process with SIGSTOP (a stalled VM or a GC pause that outlasts the
// lease); Resume continues it.
func (p *Proc) Pause() error { return p.Signal(syscall.SIGSTOP) }

// Resume sends SIGCONT to a paused process.
func (p *Proc) Resume() error { return p.Signal(syscall.SIGCONT) }

// Restart SIGKILLs the process (if running), waits for it to be gone and starts it again
// with the same flags (and data directory).
func (p *Proc) Restart() error {
	p.Kill()
	return p.Start()
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
		p.Kill()
	}
}

// Log returns the process's log so far.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, p.Name+".log"))
	return string(b)
}

// logEnd returns the last n lines of log.
func logEnd(log string, n int) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
