package test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weir-io/weir/internal/testutil"
)

// weirBin is the weir binary the tests run, built once by TestMain.
//
// The tests that run one standalone broker process each call t.Parallel: Go runs them
// together (two at a time on 2 cores) after the cluster tests, which run one at a time
// because each starts six processes and measures failover or load.
var weirBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "weir-bin")
	if err != nil {
		panic(err)
	}
	weirBin = filepath.Join(dir, "weir")
	build := exec.Command("go", "build", "-o", weirBin, "../cmd/weir")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building weir:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a weir broker process.
type proc struct {
	cmd     *exec.Cmd
	addr    string
	dir     string
	log     *os.File
	logPath string
}

// handedOut holds every port freePort returned in this test process: the kernel may give
// a port it just gave (its listener closed) again, and two listeners of one broker then
// collide (seen: a broker's gossip port equal to its Kafka port).
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePort returns a loopback port that is free now and was not returned before.
func freePort(t testing.TB) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	// Below Linux's ephemeral range (32768 and up), which the kernel hands out for port-0
	// binds and for outgoing connections: a port found free by binding port 0 could be
	// taken by any client's connect, or another package's test, before the process we
	// start binds it (a CI run lost a controller so: "bind: address already in use").
	// Ports here are taken only by an explicit bind. Checked for TCP and UDP (gossip
	// binds both).
	for tries := 0; ; tries++ {
		port := 20000 + rand.IntN(12000)
		if handedOut.ports[port] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			if tries > 1000 {
				t.Fatalf("no free port below the ephemeral range: %v", err)
			}
			continue
		}
		ln.Close()
		pc, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		pc.Close()
		handedOut.ports[port] = true
		return port
	}
}

// startWeir runs `weir broker` on addr (a fresh port if empty) with its data in dir and
// waits until the Kafka listener accepts connections.
func startWeir(t testing.TB, dir, addr string, extra ...string) *proc {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:" + strconv.Itoa(freePort(t))
	}
	args := append([]string{"broker", "--data-dir", dir, "--listen", addr, "--metrics", ""}, extra...)
	return startProc(t, dir, "weir.log", addr, args...)
}

// startProc runs weir with args, logging to dir/logName, and waits until addr accepts
// connections.
func startProc(t testing.TB, dir, logName, addr string, args ...string) *proc {
	t.Helper()
	p := spawnProc(t, dir, logName, addr, args...)
	started := false
	defer logUnless(t, &started, filepath.Join(dir, logName))
	testutil.EventuallyNoError(t, time.Minute, "weir to accept connections on "+addr, func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	started = true
	return p
}

// logUnless logs the file at path unless *ok. Deferred around a wait for a process, it
// shows the process's log when the wait failed.
func logUnless(t testing.TB, ok *bool, path string) {
	if !*ok {
		b, _ := os.ReadFile(path)
		t.Logf("%s:\n%s", path, b)
	}
}

// spawnProc runs weir with args, logging to dir/logName (appending), without waiting for
// anything; the process is killed when the test ends.
func spawnProc(t testing.TB, dir, logName, addr string, args ...string) *proc {
	t.Helper()
	path := filepath.Join(dir, logName)
	logf, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(weirBin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, addr: addr, dir: dir, log: logf, logPath: path}
	t.Cleanup(func() { p.kill(); logf.Close() })
	return p
}

// signal sends sig to the process (SIGSTOP pauses every thread of it, as a VM pause or a
// long GC stall would look from outside; SIGCONT resumes it).
func (p *proc) signal(sig syscall.Signal) error {
	if p.cmd.ProcessState != nil {
		return fmt.Errorf("process %d already exited", p.cmd.Process.Pid)
	}
	return p.cmd.Process.Signal(sig)
}

// logText is everything the process (and earlier processes logging to the same file)
// wrote so far.
func (p *proc) logText() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// scrapeMetrics reads a process's /metrics at addr and returns each sample's value by
// its series (name with labels, as printed, e.g. `weir_broker_produce_bytes_total{topic="t"}`).
func scrapeMetrics(addr string) (map[string]float64, error) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", addr, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// metricSum adds up every series of metric name (all label values).
func metricSum(m map[string]float64, name string) float64 {
	var sum float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			sum += v
		}
	}
	return sum
}

// kill sends SIGKILL: no shutdown code runs, as in a crash or OOM kill.
func (p *proc) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
