package zonelab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// netnsDir is where `ip netns` keeps the named namespaces (bind mounts).
const netnsDir = "/run/netns"

// LockDir holds one lock file per running lab (named after its prefix). A lab holds an
// flock on its file for its whole life; the kernel drops it when the process dies, so
// a free lock marks the leftovers of a crashed run.
var LockDir = "/run/weir-zonelab"

// defaultPrefix matches the prefixes Start chooses when Config.Prefix is empty.
var defaultPrefix = regexp.MustCompile(`^weir-[0-9a-f]{6}-`)

// Available reports why network namespaces cannot be used here (nil: they can): not
// root, no `ip`, or `ip netns add` refused.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("zonelab: needs root (network namespaces)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("zonelab: the ip command (iproute2) is not installed")
	}
	name := fmt.Sprintf("weir-probe%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return fmt.Errorf("zonelab: ip netns add: %v: %s", err, bytes.TrimSpace(out))
	}
	if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
		return fmt.Errorf("zonelab: ip netns del: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// ip runs `ip args...` and returns its standard output.
func ip(args ...string) ([]byte, error) {
	cmd := exec.Command("ip", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// namespaces lists the named network namespaces.
func namespaces() ([]string, error) {
	ents, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out, nil
}

// Cleanup removes every network namespace whose name starts with prefix: it kills
// (SIGKILL) every process inside it, waits for them to be gone, and deletes the
// namespace, which destroys its veth pairs. It removes the lab's lock file too. Use it
// for a prefix you own; CleanupStale finds the leftovers of crashed runs by itself.
func Cleanup(prefix string) error {
	err := cleanupNamespaces(prefix)
	if err2 := os.Remove(filepath.Join(LockDir, prefix+".lock")); err2 != nil && !errors.Is(err2, os.ErrNotExist) {
		err = errors.Join(err, err2)
	}
	return err
}

// cleanupNamespaces kills the processes in, and deletes, every namespace whose name
// starts with prefix.
func cleanupNamespaces(prefix string) error {
	if prefix == "" {
		return errors.New("zonelab: cleanup needs a non-empty prefix")
	}
	nss, err := namespaces()
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range nss {
		if !strings.HasPrefix(ns, prefix) {
			continue
		}
		if err := killAll(ns); err != nil {
			errs = append(errs, err)
		}
		if _, err := ip("netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killAll sends SIGKILL to every process in namespace ns until none is left (10 s at most).
func killAll(ns string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := ip("netns", "pids", ns)
		if err != nil {
			return err
		}
		pids := strings.Fields(string(out))
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zonelab: processes %v in %s survive SIGKILL", pids, ns)
		}
		for _, s := range pids {
			if pid, err := strconv.Atoi(s); err == nil && pid != os.Getpid() {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// CleanupStale removes what crashed runs left behind, and nothing of a lab that is still
// running in any process: the namespaces of every lab whose lock is free (its owner is
// gone), and namespaces named like Start's default prefixes that have no lock file at
// all. Start calls it first.
func CleanupStale() error {
	var errs []error
	ents, err := os.ReadDir(LockDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	locked := map[string]bool{}
	for _, e := range ents {
		prefix, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok {
			continue
		}
		l, err := tryLock(prefix)
		if errors.Is(err, errLocked) {
			locked[prefix] = true
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := Cleanup(prefix); err != nil {
			errs = append(errs, err)
		}
		l.Close()
	}
	nss, err := namespaces()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, ns := range nss {
		// Available's probe, left by a process that died between add and del.
		if pid, ok := strings.CutPrefix(ns, "weir-probe"); ok {
			if n, err := strconv.Atoi(pid); err == nil && syscall.Kill(n, 0) == syscall.ESRCH {
				if _, err := ip("netns", "del", ns); err != nil {
					errs = append(errs, err)
				}
			}
			continue
		}
		m := defaultPrefix.FindString(ns)
		if m == "" || locked[m] {
			continue
		}
		if _, err := os.Stat(filepath.Join(LockDir, m+".lock")); err == nil {
			continue // a lab that started after we listed the lock files
		}
		if err := Cleanup(m); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

var errLocked = errors.New("zonelab: lock held")

// tryLock takes the lock of prefix without waiting: errLocked if a live lab holds it.
// The returned file holds the lock until it is closed.
func tryLock(prefix string) (*os.File, error) {
	if err := os.MkdirAll(LockDir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(LockDir, prefix+".lock")
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, errLocked
			}
			return nil, err
		}
		// Whoever cleaned up a stale lab removed its file; if that happened between our
		// open and our flock, we hold a lock on a file nobody can see: open again.
		var a, b unix.Stat_t
		if unix.Fstat(int(f.Fd()), &a) == nil && unix.Stat(path, &b) == nil && a.Ino == b.Ino && a.Dev == b.Dev {
			f.Truncate(0)
			fmt.Fprintf(f, "%d\n", os.Getpid())
			return f, nil
		}
		f.Close()
	}
}

// inNetns runs fn on an OS thread that has entered network namespace ns (a name under
// /run/netns): sockets fn creates belong to ns. The thread returns to its own namespace
// afterwards; if it cannot, it stays locked and dies with the goroutine, so no other
// goroutine ever runs in ns. Only the calling goroutine's thread moves: fn must create
// its sockets synchronously (net.Dialer with a literal IP address does).
func inNetns(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("zonelab: own namespace: %w", err)
			return
		}
		defer unix.Close(orig)
		target, err := unix.Open(filepath.Join(netnsDir, ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("zonelab: namespace %s: %w", ns, err)
			return
		}
		err = unix.Setns(target, unix.CLONE_NEWNET)
		unix.Close(target)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("zonelab: entering %s: %w", ns, err)
			return
		}
		res := fn()
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		} // else: the thread exits with this goroutine, still locked
		errc <- res
	}()
	return <-errc
}

// dialIn dials addr from inside namespace ns.
func dialIn(ctx context.Context, ns, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNetns(ns, func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}
