package test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

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
	cmd  *exec.Cmd
	addr string
	dir  string
	log  *os.File
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
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
	logf, err := os.OpenFile(filepath.Join(dir, logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(weirBin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, addr: addr, dir: dir, log: logf}
	t.Cleanup(func() { p.kill(); logf.Close() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return p
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, logName))
			t.Fatalf("weir did not start on %s: %v\n%s", addr, err, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
