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
