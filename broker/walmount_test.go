package broker

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weir-io/weir/internal/mountcheck"
)

// A broker refuses to start with its shared WAL on an NFS mount without close-to-open
// (nocto), naming the option and why, unless --wal-root-unsafe-mount-ok says so.
func TestValidateRefusesUnsafeWALMount(t *testing.T) {
	dir := t.TempDir()
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	info := filepath.Join(root, "mountinfo")
	write := func(opts string) {
		line := "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n" +
			"412 27 0:52 / " + filepath.Join(root, "fsx") + " rw,relatime shared:220 - nfs4 svm.fsx.example:/vol1 " + opts + "\n"
		if err := os.WriteFile(info, []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := func(args ...string) Config {
		c := DefaultConfig()
		c.DataDir = filepath.Join(root, "data")
		c.MountInfo = info
		fs := flag.NewFlagSet("broker", flag.ContinueOnError)
		c.BindFlags(fs)
		if err := fs.Parse(append([]string{"--wal-root", filepath.Join(root, "fsx", "weir-wal")}, args...)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	write("rw,relatime,vers=4.1,rsize=262144,wsize=262144,namlen=255,hard,nocto,proto=tcp,timeo=600,retrans=2,sec=sys,lookupcache=pos,local_lock=none")
	c := cfg()
	err = c.Validate()
	if !errors.Is(err, mountcheck.ErrUnsafe) || !strings.Contains(err.Error(), "nocto") || !strings.Contains(err.Error(), "close-to-open") {
		t.Fatalf("nocto: %v", err)
	}
	c = cfg("--wal-root-unsafe-mount-ok")
	if err := c.Validate(); err != nil {
		t.Fatalf("nocto with --wal-root-unsafe-mount-ok: %v", err)
	}
	write("rw,relatime,vers=4.1,rsize=262144,wsize=262144,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,lookupcache=pos,local_lock=none")
	c = cfg()
	if err := c.Validate(); err != nil {
		t.Fatalf("a good mount: %v", err)
	}
	// Without --wal-root the WAL is this host's alone: not checked.
	c = DefaultConfig()
	c.DataDir, c.MountInfo = filepath.Join(root, "data"), filepath.Join(root, "missing")
	if err := c.Validate(); err != nil {
		t.Fatalf("no --wal-root: %v", err)
	}
}

// --wal-zero-fill auto skips the zeros on NFS and FUSE mounts (they would double the
// bytes sent to the file server) and keeps them on a local file system; on and off
// decide alone; anything else is refused.
func TestWALZeroFillFollowsTheMount(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	info := filepath.Join(root, "mountinfo")
	lines := "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n" +
		"412 27 0:52 / " + filepath.Join(root, "fsx") + " rw,relatime - nfs4 svm.fsx.example:/vol1 rw,vers=4.1,hard\n" +
		"413 27 0:53 / " + filepath.Join(root, "lab") + " rw,relatime - fuse.nfsfs lab rw\n"
	if err := os.WriteFile(info, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flag, dir string
		skip      bool
	}{
		{"auto", "fsx/weir-wal/broker-1/epoch-3", true},
		{"auto", "lab/wal", true},
		{"auto", "data/wal", false},
		{"on", "fsx/weir-wal", false},
		{"off", "data/wal", true},
	} {
		cfg := DefaultConfig()
		cfg.MountInfo = info
		fs := flag.NewFlagSet("broker", flag.ContinueOnError)
		cfg.BindFlags(fs)
		if err := fs.Parse([]string{"--wal-zero-fill", c.flag}); err != nil {
			t.Fatal(err)
		}
		if skip, why := cfg.noZeroFill(filepath.Join(root, c.dir)); skip != c.skip {
			t.Errorf("--wal-zero-fill %s, WAL in %s: skip %v (%s), want %v", c.flag, c.dir, skip, why, c.skip)
		}
	}
	cfg := DefaultConfig()
	cfg.WALZeroFill = "sometimes"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "wal-zero-fill") {
		t.Fatalf("--wal-zero-fill sometimes: %v", err)
	}
}
