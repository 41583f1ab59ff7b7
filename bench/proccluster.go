package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// procCluster runs Weir controllers and brokers as separate processes of one binary, as
// separate hosts would run them: the brokers share a WAL root (the FSx mount in
// production) and a local object store directory. `weir bench failover` measures on it.
type procCluster struct {
	bin  string
	dir  string
	out  io.Writer
	apis []string // controller API addresses

	mu          sync.Mutex
	controllers []*weirProc
	brokers     []*weirProc
}

// weirProc is one running (or stopped) process and how to start it again.
type weirProc struct {
	name    string
	args    []string
	kafka   string // brokers: the Kafka listener
	metrics string // the /metrics listener
	cmd     *exec.Cmd
	log     *os.File
	done    chan struct{}
}

// procClusterConfig describes a cluster to start.
type procClusterConfig struct {
	Bin         string // the weir binary
	Dir         string
	Controllers int
	Brokers     int
	Zones       []string
	// BrokerArgs and ControllerArgs are appended to every broker's / controller's flags.
	BrokerArgs, ControllerArgs []string
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

// startProcCluster starts the controllers, then the brokers, and waits until every
// process reports ready.
func startProcCluster(ctx context.Context, cfg procClusterConfig, out io.Writer) (*procCluster, error) {
	if len(cfg.Zones) == 0 {
		cfg.Zones = []string{"a", "b", "c"}
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	c := &procCluster{bin: cfg.Bin, dir: cfg.Dir, out: out}
	pp := &portPicker{}
	defer pp.release()
	freeAddr := pp.next
	var peers []string
	for i := 1; i <= cfg.Controllers; i++ {
		raft, err := freeAddr()
		if err != nil {
			return nil, err
		}
		api, err := freeAddr()
		if err != nil {
			return nil, err
		}
		peers = append(peers, fmt.Sprintf("%d=%s/%s", i, raft, api))
		c.apis = append(c.apis, api)
	}
	for i := 1; i <= cfg.Controllers; i++ {
		m, err := freeAddr()
		if err != nil {
			return nil, err
		}
		args := append([]string{"controller", "--node-id", fmt.Sprint(i),
			"--data-dir", filepath.Join(cfg.Dir, fmt.Sprintf("controller-%d", i)),
			"--peers", strings.Join(peers, ","), "--metrics", m, "--log-level", "info"}, cfg.ControllerArgs...)
		c.controllers = append(c.controllers, &weirProc{name: fmt.Sprintf("controller-%d", i), args: args, metrics: m})
	}
	var gossip []string
	for i := 0; i < cfg.Brokers; i++ {
		g, err := freeAddr()
		if err != nil {
			return nil, err
		}
		gossip = append(gossip, g)
	}
	for i := 1; i <= cfg.Brokers; i++ {
		kafka, err := freeAddr()
		if err != nil {
			return nil, err
		}
		m, err := freeAddr()
		if err != nil {
			return nil, err
		}
		args := append([]string{"broker", "--node-id", fmt.Sprint(i), "--rack", cfg.Zones[(i-1)%len(cfg.Zones)],
			"--listen", kafka, "--metrics", m, "--controllers", strings.Join(c.apis, ","),
			"--data-dir", filepath.Join(cfg.Dir, fmt.Sprintf("broker-%d", i)), "--wal-root", filepath.Join(cfg.Dir, "wal"),
			"--gossip-addr", gossip[i-1], "--gossip-seeds", strings.Join(gossip, ","), "--log-level", "info"}, cfg.BrokerArgs...)
		c.brokers = append(c.brokers, &weirProc{name: fmt.Sprintf("broker-%d", i), args: args, kafka: kafka, metrics: m})
	}
	pp.release()
	for _, p := range c.controllers {
		if err := c.start(p); err != nil {
			c.Close()
			return nil, err
		}
	}
	for _, p := range c.brokers {
		if err := c.start(p); err != nil {
			c.Close()
			return nil, err
		}
	}
	for _, p := range append(append([]*weirProc(nil), c.controllers...), c.brokers...) {
		if err := p.waitReady(ctx, 2*time.Minute); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// start runs p, appending its output to <dir>/<name>.log.
func (c *procCluster) start(p *weirProc) error {
	f, err := os.OpenFile(filepath.Join(c.dir, p.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("bench: starting %s: %w", p.name, err)
	}
	p.cmd, p.log, p.done = cmd, f, make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}, f *os.File) {
		cmd.Wait()
		f.Close()
		close(done)
	}(cmd, p.done, f)
	return nil
}

// waitReady waits until the process answers /readyz.
func (p *weirProc) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	cl := http.Client{Timeout: time.Second}
	for {
		resp, err := cl.Get("http://" + p.metrics + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("bench: %s exited while starting (see %s.log)", p.name, p.name)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: %s not ready after %v (see %s.log)", p.name, timeout, p.name)
		}
	}
}

// signal sends sig to a running process.
func (p *weirProc) signal(sig syscall.Signal) error {
	if p.cmd == nil || p.cmd.Process == nil {
		return errors.New("bench: not running")
	}
	return p.cmd.Process.Signal(sig)
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *weirProc) kill() {
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop asks the process to shut down (SIGTERM), then kills it after grace.
func (p *weirProc) stop(grace time.Duration) {
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
}

// Bootstrap is the brokers' Kafka addresses.
func (c *procCluster) Bootstrap() []string {
	var out []string
	for _, b := range c.brokers {
		out = append(out, b.kafka)
	}
	return out
}

// Close stops every process.
func (c *procCluster) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.brokers {
		p.stop(5 * time.Second)
	}
	for _, p := range c.controllers {
		p.stop(5 * time.Second)
	}
}

// scrape reads a process's metrics: family name → sum of its samples' values (counters,
// gauges; for histograms the sum and count appear as name_sum and name_count).
func scrape(addr string) (map[string]float64, error) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.Metric {
			switch {
			case m.Counter != nil:
				out[name] += m.Counter.GetValue()
			case m.Gauge != nil:
				out[name] += m.Gauge.GetValue()
			case m.Histogram != nil:
				label := ""
				for _, l := range m.Label {
					label += "{" + l.GetName() + "=" + l.GetValue() + "}"
				}
				out[name+label+"_sum"] += m.Histogram.GetSampleSum()
				out[name+label+"_count"] += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return out, nil
}
