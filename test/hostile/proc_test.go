package hostile

import (
	"bufio"
	"context"
	"fmt"
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

var (
	buildOnce sync.Once
	weirBin   string
	buildErr  error
	buildOut  []byte
)

// weir builds the weir binary once per test binary; a test is skipped (with the reason)
// only when it cannot be built.
func weir(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "weir-hostile-bin")
		if err != nil {
			buildErr = err
			return
		}
		weirBin = filepath.Join(dir, "weir")
		cmd := exec.Command("go", "build", "-o", weirBin, "../../cmd/weir")
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Skipf("cannot build the weir binary (go build ../../cmd/weir): %v\n%s", buildErr, buildOut)
	}
	return weirBin
}

// brokerProc is a standalone `weir broker` process.
type brokerProc struct {
	cmd     *exec.Cmd
	addr    string // Kafka listener
	metrics string // /metrics and /readyz
	logPath string
	exited  chan struct{} // closed once the process has exited
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startBroker runs `weir broker` alone (local metadata, data in a temp dir) with extra
// flags and waits until it is ready; it is killed when the test ends.
func startBroker(t *testing.T, extra ...string) *brokerProc {
	t.Helper()
	bin := weir(t)
	dir := t.TempDir()
	p := &brokerProc{addr: freeAddr(t), metrics: freeAddr(t), logPath: filepath.Join(dir, "weir.log")}
	logf, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"broker", "--data-dir", filepath.Join(dir, "data"), "--listen", p.addr, "--metrics", p.metrics}, extra...)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.exited = make(chan struct{})
	go func() {
		p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
		logf.Close()
	})
	cl := http.Client{Timeout: time.Second}
	ready := false
	defer func() {
		if !ready { // the broker exited or the wait timed out: its log says why
			b, _ := os.ReadFile(p.logPath)
			t.Logf("the broker's log:\n%s", b)
		}
	}()
	testutil.EventuallyNoError(t, time.Minute, "the broker to become ready", func() error {
		if !p.alive() {
			t.Fatal("the broker exited before it was ready")
		}
		resp, err := cl.Get("http://" + p.metrics + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		return nil
	})
	ready = true
	return p
}

// alive reports whether the process is still running.
func (p *brokerProc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// memory reads VmRSS and VmHWM (peak RSS) of the process, in bytes.
func (p *brokerProc) memory() (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	return rss, hwm, nil
}

// scrape reads the process's /metrics: each sample's value by its series as printed.
func (p *brokerProc) scrape() (map[string]float64, error) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
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
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// sum adds up every series of metric name.
func sum(m map[string]float64, name string) float64 {
	var s float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			s += v
		}
	}
	return s
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
