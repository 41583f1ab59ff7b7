package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// brokerProc is a standalone `weir broker` run by the suite as its own process, so
// that its CPU time is its own (/proc/<pid>/stat) and the load generator's is not in it.
type brokerProc struct {
	cmd     *exec.Cmd
	done    chan struct{}
	kafka   string
	metrics string
	dataDir string
	logPath string
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func startStandalone(ctx context.Context, bin, dir string, extra []string) (*brokerProc, error) {
	kafka, err := freePort()
	if err != nil {
		return nil, err
	}
	m, err := freePort()
	if err != nil {
		return nil, err
	}
	b := &brokerProc{kafka: kafka, metrics: m, dataDir: filepath.Join(dir, "standalone"), logPath: filepath.Join(dir, "standalone.log"), done: make(chan struct{})}
	if err := os.MkdirAll(b.dataDir, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.Create(b.logPath)
	if err != nil {
		return nil, err
	}
	args := append([]string{"broker", "--data-dir", b.dataDir, "--listen", kafka, "--metrics", m, "--log-level", "warn", "--drain-timeout", "0"}, extra...)
	b.cmd = exec.Command(bin, args...)
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	if err := b.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s broker: %w", bin, err)
	}
	go func() { b.cmd.Wait(); logf.Close(); close(b.done) }()
	cl := http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(time.Minute); ; {
		if resp, err := cl.Get("http://" + m + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return b, nil
			}
		}
		select {
		case <-b.done:
			return nil, fmt.Errorf("the standalone broker exited while starting (see %s)", b.logPath)
		case <-ctx.Done():
			b.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.stop()
			return nil, fmt.Errorf("the standalone broker is not ready after a minute (see %s)", b.logPath)
		}
	}
}

func (b *brokerProc) stop() {
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		b.cmd.Process.Kill()
		<-b.done
	}
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat: 100 on every
// Linux architecture Go supports (the kernel's HZ is hidden behind it).
const clockTicks = 100

// cpuSeconds is the user+system CPU time of process pid so far.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: fields count
	// from the last ')'. utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc stat format")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("unexpected /proc stat format")
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return (ut + st) / clockTicks, nil
}

// histogram is one scraped Prometheus histogram: cumulative counts per upper bound.
type histogram struct {
	bounds []float64 // seconds, ascending, +Inf last
	counts []float64 // cumulative
}

// scrapeHistogram reads the histogram family name with label=value from addr's /metrics.
func scrapeHistogram(addr, name, label, value string) (histogram, error) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		return histogram{}, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return histogram{}, err
	}
	f, ok := fams[name]
	if !ok {
		return histogram{}, fmt.Errorf("no %s on %s", name, addr)
	}
	for _, m := range f.Metric {
		match := false
		for _, l := range m.Label {
			match = match || (l.GetName() == label && l.GetValue() == value)
		}
		if !match || m.Histogram == nil {
			continue
		}
		var h histogram
		for _, b := range m.Histogram.Bucket {
			h.bounds = append(h.bounds, b.GetUpperBound())
			h.counts = append(h.counts, float64(b.GetCumulativeCount()))
		}
		h.bounds = append(h.bounds, math.Inf(1))
		h.counts = append(h.counts, float64(m.Histogram.GetSampleCount()))
		return h, nil
	}
	return histogram{}, nil // not observed yet: an empty histogram
}

// sub is h minus an earlier scrape of the same histogram: the observations in between.
func (h histogram) sub(old histogram) histogram {
	out := histogram{bounds: h.bounds, counts: append([]float64(nil), h.counts...)}
	if len(old.counts) == len(h.counts) {
		for i := range out.counts {
			out.counts[i] -= old.counts[i]
		}
	}
	return out
}

func (h histogram) total() float64 {
	if len(h.counts) == 0 {
		return 0
	}
	return h.counts[len(h.counts)-1]
}

// quantile estimates the q-quantile in ms by linear interpolation inside its bucket (as
// Prometheus's histogram_quantile does), and returns the bucket's bounds too: with
// power-of-two buckets the estimate is only good to within that range.
func (h histogram) quantile(q float64) (est, lo, hi float64) {
	n := h.total()
	if n == 0 {
		return 0, 0, 0
	}
	rank := q * n
	i := sort.Search(len(h.counts), func(i int) bool { return h.counts[i] >= rank })
	if i >= len(h.counts)-1 { // in +Inf: the best we know is the last finite bound
		b := h.bounds[len(h.bounds)-2] * 1e3
		return b, b, math.Inf(1)
	}
	below, lo := 0.0, 0.0
	if i > 0 {
		below, lo = h.counts[i-1], h.bounds[i-1]
	}
	hi = h.bounds[i]
	in := h.counts[i] - below
	est = hi
	if in > 0 {
		est = lo + (hi-lo)*(rank-below)/in
	}
	return est * 1e3, lo * 1e3, hi * 1e3
}
