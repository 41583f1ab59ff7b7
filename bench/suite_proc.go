package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
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

// histogram is one scraped Prometheus histogram: cumulative counts per upper bound. A
// histogram with native buckets (exposed in the protobuf format only) is read from those:
// about 9 % wide where the classic ones double.
type histogram struct {
	bounds []float64 // seconds, ascending, +Inf last
	counts []float64 // cumulative
	native bool
	base   float64 // native: the growth factor, so a bucket's lower bound is its upper / base
}

// protoAccept asks promhttp for the delimited protobuf format, the one that carries
// native histogram buckets.
const protoAccept = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"

// eachFamily calls fn with every metric family of addr's /metrics (the protobuf format,
// which carries native histograms) until fn returns false.
func eachFamily(ctx context.Context, addr string, fn func(*dto.MetricFamily) bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", protoAccept)
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	for {
		var f dto.MetricFamily
		if err := dec.Decode(&f); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("metrics of %s: %w", addr, err)
		}
		if !fn(&f) {
			return nil
		}
	}
}

// scrapeHistogram reads the histogram family name with label=value from addr's /metrics.
func scrapeHistogram(addr, name, label, value string) (histogram, error) {
	var fam *dto.MetricFamily
	err := eachFamily(context.Background(), addr, func(f *dto.MetricFamily) bool {
		if f.GetName() == name {
			fam = f
		}
		return fam == nil
	})
	if err != nil {
		return histogram{}, err
	}
	if fam == nil {
		return histogram{}, fmt.Errorf("no %s on %s", name, addr)
	}
	for _, m := range fam.Metric {
		match := false
		for _, l := range m.Label {
			match = match || (l.GetName() == label && l.GetValue() == value)
		}
		if !match || m.Histogram == nil {
			continue
		}
		if h, ok := nativeBuckets(m.Histogram); ok {
			return h, nil
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

// nativeBuckets turns a native histogram's positive buckets into cumulative counts per
// upper bound: bucket i holds (base^(i-1), base^i] with base = 2^(2^-schema); the zero
// bucket holds [0, zero threshold]. Durations have no negative buckets.
func nativeBuckets(m *dto.Histogram) (histogram, bool) {
	if len(m.GetPositiveSpan()) == 0 || m.Schema == nil {
		return histogram{}, false
	}
	base := math.Pow(2, math.Pow(2, -float64(m.GetSchema())))
	h := histogram{native: true, base: base, bounds: []float64{m.GetZeroThreshold()}, counts: []float64{float64(m.GetZeroCount())}}
	cum, count := float64(m.GetZeroCount()), int64(0)
	deltas := m.GetPositiveDelta()
	idx, d := int32(0), 0
	for _, sp := range m.GetPositiveSpan() {
		idx += sp.GetOffset()
		for range sp.GetLength() {
			if d >= len(deltas) {
				return histogram{}, false
			}
			count += deltas[d]
			d++
			cum += float64(count)
			h.bounds = append(h.bounds, math.Pow(base, float64(idx)))
			h.counts = append(h.counts, cum)
			idx++
		}
	}
	h.bounds = append(h.bounds, math.Inf(1))
	h.counts = append(h.counts, float64(m.GetSampleCount()))
	return h, true
}

// sub is h minus an earlier scrape of the same histogram: the observations in between.
// Native buckets appear as they are first used, so the earlier scrape's cumulative count
// at each bound is taken at its largest bound not above it (its buckets are a subset).
func (h histogram) sub(old histogram) histogram {
	out := histogram{bounds: h.bounds, counts: append([]float64(nil), h.counts...), native: h.native, base: h.base}
	for i, b := range out.bounds {
		j := sort.Search(len(old.bounds), func(j int) bool { return old.bounds[j] > b }) - 1
		if j >= 0 {
			out.counts[i] -= old.counts[j]
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
	if h.base > 1 && i > 0 {
		// Native buckets are sparse: the previous bound listed may be far below.
		lo = max(lo, hi/h.base)
	}
	in := h.counts[i] - below
	est = hi
	if in > 0 {
		est = lo + (hi-lo)*(rank-below)/in
	}
	return est * 1e3, lo * 1e3, hi * 1e3
}
