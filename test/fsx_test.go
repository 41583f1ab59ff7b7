package test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/weir-io/weir/test/nfsfs"
)

// The process-level failover tests again, with the shared WAL root served by test/nfsfs
// on the FSx profile: every broker process mounts it separately (its own page,
// attribute and entry caches; writes reach the other brokers only at fsync or close),
// every operation pays the modelled FSx latency, and the throughput cap is shared.
// What the plain tests prove on one ext4 directory and one page cache, these prove
// through per-host NFS-like caches.

// fsxLab is the FSx server of one cluster and its mounts, one per broker process.
type fsxLab struct {
	t       testing.TB
	backing string
	model   *nfsfs.Model
	mu      sync.Mutex
	mounts  map[string]*nfsfs.Mount
}

func newFSxLab(t testing.TB, backing string, model *nfsfs.Model) *fsxLab {
	t.Helper()
	nfsfs.Require(t)
	if err := os.MkdirAll(backing, 0o755); err != nil {
		t.Fatal(err)
	}
	return &fsxLab{t: t, backing: backing, model: model, mounts: map[string]*nfsfs.Mount{}}
}

// mount returns the mount point of the process named name (mounted on first use, with
// NFS's default attribute timeouts).
func (l *fsxLab) mount(name string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m := l.mounts[name]; m != nil {
		return m.Dir
	}
	m := nfsfs.MountT(l.t, filepath.Join(filepath.Dir(l.backing), "mnt-"+name), l.backing, l.model, nfsfs.Options{Name: name})
	l.mounts[name] = m
	return m.Dir
}

// fsxModel is the model of the FSx variants: the FSx profile.
func fsxModel(t *testing.T) *nfsfs.Model {
	nfsfs.Require(t)
	m := nfsfs.NewModel(nfsfs.FSx)
	t.Cleanup(func() {
		q, n := m.CommitStats(0.5, 0.99, 0.999)
		t.Logf("FSx model: %d COMMITs, p50 %v p99 %v p99.9 %v", n, q[0].Round(time.Microsecond), q[1].Round(time.Microsecond), q[2].Round(time.Microsecond))
	})
	return m
}

// SIGKILL of the coordinator on FSx (TestProcFailoverKillOne).
func TestFSxFailoverKillOne(t *testing.T) { testFailoverKillOne(t, fsxModel(t)) }

// SIGSTOP past the fence on FSx (TestProcFailoverPausedBroker).
func TestFSxFailoverPausedBroker(t *testing.T) { testFailoverPausedBroker(t, fsxModel(t)) }

// A second process with a live broker's ID, on another host (its own mount), on FSx
// (TestProcFailoverDuplicateBrokerID).
func TestFSxFailoverDuplicateBrokerID(t *testing.T) { testFailoverDuplicateBrokerID(t, fsxModel(t)) }
