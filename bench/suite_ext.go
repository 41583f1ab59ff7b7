package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

// What the suite runs by name (other benchmarks), and what it says about the machine.

// shell runs cmd with sh in the current directory and returns its combined output.
func (s *suite) shell(ctx context.Context, cmd string) (string, error) {
	c := exec.CommandContext(ctx, "sh", "-c", cmd)
	var buf bytes.Buffer
	c.Stdout, c.Stderr = &buf, &buf
	if s.cfg.Verbose {
		c.Stdout, c.Stderr = io.MultiWriter(&buf, s.out), io.MultiWriter(&buf, s.out)
	}
	err := c.Run()
	return buf.String(), err
}

// benchMetrics reads `go test -bench` result lines: value-unit pairs after the
// iteration count, the last value of each unit winning.
func benchMetrics(out string) map[string]float64 {
	m := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				m[f[i+1]] = v
			}
		}
	}
	return m
}

func machine(dir string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), CPU: "unknown", Kernel: "unknown", Disk: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	// The file system holding dir: the longest mount point that is a prefix of it.
	if abs, err := filepath.Abs(dir); err == nil {
		if b, err := os.ReadFile("/proc/mounts"); err == nil {
			best := ""
			for _, l := range strings.Split(string(b), "\n") {
				f := strings.Fields(l)
				if len(f) < 3 {
					continue
				}
				mp := f[1]
				if (abs == mp || strings.HasPrefix(abs, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(best) {
					best, m.Disk = mp, fmt.Sprintf("%s (%s on %s)", abs, f[2], f[0])
				}
			}
		}
	}
	return m
}

// commit is the VCS revision the binary was built from (go build stamps it), else the
// one git sees in the current directory (builds in worktrees or with -buildvcs=false
// carry no stamp).
func commit() string {
	rev, dirty := "unknown", false
	if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		rev = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
			dirty = len(bytes.TrimSpace(st)) > 0
		}
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return rev
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return rev
}
