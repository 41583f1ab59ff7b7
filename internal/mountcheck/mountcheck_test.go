package mountcheck

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FSx for ONTAP as AWS documents the mount (nfsvers=4.1 and defaults), and the same
// with the options the fence needs.
const (
	fsxDefault = `412 27 0:52 / /mnt/fsx rw,relatime shared:220 - nfs4 svm-0123456789abcdef0.fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com:/vol1 rw,relatime,vers=4.1,rsize=262144,wsize=262144,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.0.1.23,local_lock=none,addr=10.0.1.10`
	fsxGood    = `412 27 0:52 / /mnt/fsx rw,relatime shared:220 - nfs4 svm-0123456789abcdef0.fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com:/vol1 rw,relatime,vers=4.1,rsize=262144,wsize=262144,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=10.0.1.23,lookupcache=pos,local_lock=none,addr=10.0.1.10`
	rootExt4   = `27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard`
)

func mount(t *testing.T, line string) Mount {
	t.Helper()
	ms, err := Parse(strings.NewReader(line + "\n"))
	if err != nil || len(ms) != 1 {
		t.Fatalf("parse %q: %v %v", line, ms, err)
	}
	return ms[0]
}

func TestParse(t *testing.T) {
	m := mount(t, fsxGood)
	if m.Point != "/mnt/fsx" || m.FSType != "nfs4" || !strings.HasSuffix(m.Source, ":/vol1") {
		t.Fatalf("%+v", m)
	}
	if m.Options["vers"] != "4.1" || m.Options["lookupcache"] != "pos" {
		t.Fatalf("options %v", m.Options)
	}
	if _, ok := m.Options["hard"]; !ok {
		t.Fatal("flag hard missing")
	}
	// No optional fields, and an escaped space in the mount point.
	m = mount(t, `90 27 0:60 / /mnt/my\040wal rw - nfs4 srv:/x rw,vers=4.2,lookupcache=none`)
	if m.Point != "/mnt/my wal" {
		t.Fatalf("mount point %q", m.Point)
	}
	if _, err := Parse(strings.NewReader("1 2 3 4\n")); err == nil {
		t.Fatal("a malformed line parsed")
	}
}

func fatal(ps []Problem) []string {
	var out []string
	for _, p := range ps {
		if p.Fatal {
			out = append(out, strings.SplitN(p.Option, " ", 2)[0])
		}
	}
	return out
}

func TestCheck(t *testing.T) {
	nfs := func(fstype, opts string) string {
		return "90 27 0:60 / /mnt/wal rw,relatime - " + fstype + " srv:/x " + opts
	}
	for _, c := range []struct {
		name     string
		line     string
		fatal    []string
		warnings int
	}{
		{"FSx with lookupcache=pos", fsxGood, nil, 0},
		{"FSx as AWS documents it: lookupcache defaults to all", fsxDefault, []string{"lookupcache=all"}, 0},
		{"lookupcache=none", nfs("nfs4", "rw,vers=4.1,hard,lookupcache=none"), nil, 0},
		{"nocto", nfs("nfs4", "rw,vers=4.1,hard,nocto,lookupcache=pos"), []string{"nocto"}, 0},
		{"NFSv3", nfs("nfs", "rw,vers=3,hard,lookupcache=pos"), []string{"vers=3"}, 0},
		{"nfs without a version", nfs("nfs", "rw,hard,lookupcache=pos"), []string{"vers="}, 0},
		{"soft", nfs("nfs4", "rw,vers=4.1,soft,lookupcache=pos"), nil, 1},
		{"softerr and nocto", nfs("nfs4", "rw,vers=4.2,softerr,nocto,lookupcache=pos"), []string{"nocto"}, 1},
		{"noac and actimeo do not matter", nfs("nfs4", "rw,vers=4.1,hard,noac,actimeo=0,local_lock=all,lookupcache=pos"), nil, 0},
		{"ext4", rootExt4, nil, 0},
		{"fuse", "90 27 0:60 / /mnt/wal rw - fuse.s3fs s3fs rw", nil, 1},
	} {
		ps := Check(mount(t, c.line))
		got := fatal(ps)
		if strings.Join(got, ",") != strings.Join(c.fatal, ",") {
			t.Errorf("%s: refused for %v, want %v (%v)", c.name, got, c.fatal, ps)
		}
		if w := len(ps) - len(got); w != c.warnings {
			t.Errorf("%s: %d warnings, want %d (%v)", c.name, w, c.warnings, ps)
		}
		for _, p := range ps {
			if p.Why == "" {
				t.Errorf("%s: %s without a reason", c.name, p.Option)
			}
		}
	}
}

func TestFind(t *testing.T) {
	ms, err := Parse(strings.NewReader(strings.Join([]string{rootExt4, fsxDefault, fsxGood,
		`95 412 0:61 / /mnt/fsx/sub rw - nfs4 srv:/y rw,vers=4.1,nocto`}, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"/mnt/fsx":          "/mnt/fsx",
		"/mnt/fsx/weir-wal": "/mnt/fsx",
		"/mnt/fsxother":     "/",
		"/mnt/fsx/sub/a":    "/mnt/fsx/sub",
		"/mnt/fsx/subway":   "/mnt/fsx",
		"/var/lib/weir/wal": "/",
	} {
		m, ok := Find(ms, path)
		if !ok || m.Point != want {
			t.Errorf("Find(%s) = %s %v, want %s", path, m.Point, ok, want)
		}
	}
	// Two mounts on /mnt/fsx: the one listed last is on top.
	if m, _ := Find(ms, "/mnt/fsx/x"); m.Options["lookupcache"] != "pos" {
		t.Errorf("the mount underneath was chosen: %v", m.Options)
	}
}

// CheckPath resolves symlinks (a WAL root linked into an NFS mount is checked as the
// NFS mount) and paths that do not exist yet, and says which option and why.
func TestCheckPath(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "nfs")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	symlink := filepath.Join(dir, "walroot")
	if err := os.Symlink(real, symlink); err != nil {
		t.Fatal(err)
	}
	resolvedReal, err := filepath.EvalSymlinks(real)
	if err != nil {
		t.Fatal(err)
	}
	info := filepath.Join(dir, "mountinfo")
	lines := rootExt4 + "\n" + "90 27 0:60 / " + resolvedReal + " rw - nfs4 srv:/x rw,vers=4.1,hard,nocto,lookupcache=pos\n"
	if err := os.WriteFile(info, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := CheckPath(filepath.Join(symlink, "broker-1"), info)
	if err != nil {
		t.Fatal(err)
	}
	if res.Mount.Point != resolvedReal {
		t.Fatalf("found %s for %s", res.Mount.Point, res.Resolved)
	}
	err = res.Err()
	if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "nocto") || !strings.Contains(err.Error(), "close-to-open") {
		t.Fatalf("error %v", err)
	}
	res, err = CheckPath(filepath.Join(dir, "elsewhere"), info)
	if err != nil || res.Err() != nil || res.Mount.Point != "/" {
		t.Fatalf("a path on ext4: %+v %v", res, err)
	}
	if _, err := CheckPath(dir, filepath.Join(dir, "missing")); err == nil {
		t.Fatal("no mountinfo file, no error")
	}
}
