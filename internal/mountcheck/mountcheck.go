// Package mountcheck checks, at start-up, the mount options of the file system that
// holds the shared WAL (--wal-root): the storage fence's argument (wal/doc.go, "Why
// exactly one holds, on NFS") assumes things of an NFS mount that some options undo.
//
// Refused (the fence's argument breaks):
//
//   - nocto: without close-to-open, a fresh open may use cached attributes and pages. The
//     owner's fence check could miss the taker's fence record and ack after it was
//     fenced; the taker's scan could miss records the owner synced.
//   - NFS version below 4: NFSv3 has no exact change attribute, and the fence record
//     overwrites FENCE in place at the same size: an overwrite within one mtime tick may
//     go unnoticed by the owner.
//   - lookupcache=all (the kernel's default; mountinfo then shows no lookupcache option):
//     a cached negative lookup may hide, for up to the directory attribute timeout, a
//     segment or SEAL another host created, and a scan that follows segments by name
//     would end early. Mount with lookupcache=positive (shown as lookupcache=pos) or
//     lookupcache=none.
//
// Warned about (safe, but worth knowing):
//
//   - soft, softerr: a request that times out fails instead of being retried. The WAL
//     fails safe (a failed write or fence check acks nothing) but for good: the broker
//     stops serving until restarted. Prefer hard.
//   - a file system type that is neither NFS nor a known local one: not checked.
//
// Not a concern: local_lock (Weir takes no NFS locks), actimeo/ac* and noac (the fence's
// fresh opens revalidate whatever the attribute cache holds), rsize/wsize, timeo, retrans.
package mountcheck

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrUnsafe: the mount has options that break the storage fence's argument.
var ErrUnsafe = errors.New("mountcheck: unsafe mount for the shared WAL")

// DefaultMountInfo is where Linux lists this process's mounts.
const DefaultMountInfo = "/proc/self/mountinfo"

// Mount is one line of a mountinfo file (proc(5)).
type Mount struct {
	Point  string // where it is mounted (unescaped)
	FSType string
	Source string
	// Options are the per-mount and the super block options (NFS lists its own among
	// the latter); a flag maps to "".
	Options map[string]string
}

// Problem is one option found wrong.
type Problem struct {
	Option string // as mounted, or what is missing
	Why    string
	Fatal  bool // refuse to start; otherwise a warning
}

func (p Problem) String() string { return p.Option + ": " + p.Why }

// Parse reads a mountinfo file.
func Parse(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+2 >= len(f) {
			return nil, fmt.Errorf("mountcheck: malformed mountinfo line %q", line)
		}
		m := Mount{Point: unescape(f[4]), FSType: f[sep+1], Source: unescape(f[sep+2]), Options: map[string]string{}}
		addOptions(m.Options, f[5])
		if sep+3 < len(f) {
			addOptions(m.Options, f[sep+3])
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mountcheck: reading mountinfo: %w", err)
	}
	return out, nil
}

func addOptions(dst map[string]string, s string) {
	for _, o := range strings.Split(s, ",") {
		if o == "" {
			continue
		}
		k, v, _ := strings.Cut(o, "=")
		dst[k] = v
	}
}

// unescape undoes mountinfo's octal escapes (\040 for a space, \011, \012, \134).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// Find returns the mount holding path (absolute, symlinks resolved): the one with the
// longest mount point that contains it, the last listed among equals (mounted on top).
func Find(mounts []Mount, path string) (Mount, bool) {
	best, found := Mount{}, false
	for _, m := range mounts {
		if !within(path, m.Point) {
			continue
		}
		if !found || len(m.Point) >= len(best.Point) {
			best, found = m, true
		}
	}
	return best, found
}

func within(path, point string) bool {
	return point == "/" || path == point || strings.HasPrefix(path, point+"/")
}

// localTypes are file systems of one host: the fence's argument holds on them as on any
// POSIX file system (a single kernel's page cache).
var localTypes = map[string]bool{"ext2": true, "ext3": true, "ext4": true, "xfs": true, "btrfs": true, "zfs": true,
	"f2fs": true, "tmpfs": true, "overlay": true, "ramfs": true, "bcachefs": true}

// Check lists what is wrong with m for the shared WAL.
func Check(m Mount) []Problem {
	var out []Problem
	switch {
	case m.FSType == "nfs" || m.FSType == "nfs4":
	case localTypes[m.FSType]:
		return nil
	default:
		return []Problem{{Option: "type " + m.FSType, Why: "not NFS nor a known local file system: its mount options are not checked (the storage fence's argument is made for NFSv4)"}}
	}
	if _, ok := m.Options["nocto"]; ok {
		out = append(out, Problem{Option: "nocto", Fatal: true,
			Why: "close-to-open consistency is off, so a fresh open may use cached attributes and pages: the owner's fence check could miss the taker's fence record and ack after being fenced, and a taker could miss synced records; remove nocto"})
	}
	vers := m.Options["vers"]
	if vers == "" {
		vers = m.Options["nfsvers"]
	}
	if major(vers) < 4 && (vers != "" || m.FSType == "nfs") {
		out = append(out, Problem{Option: "vers=" + vers, Fatal: true,
			Why: "NFS below version 4 has no exact change attribute: the fence record overwrites FENCE at the same size, and an overwrite within one mtime tick may go unnoticed by the fenced owner; mount with vers=4.1"})
	}
	switch lc, ok := m.Options["lookupcache"]; {
	case !ok || lc == "all":
		out = append(out, Problem{Option: "lookupcache=all (the default)", Fatal: true,
			Why: "negative lookups are cached: a WAL segment or SEAL another host created may stay hidden for the directory attribute timeout, and a scan following segments by name would end early; mount with lookupcache=positive"})
	case lc == "pos" || lc == "positive" || lc == "none":
	default:
		out = append(out, Problem{Option: "lookupcache=" + lc, Fatal: true, Why: "unknown lookup cache mode; mount with lookupcache=positive"})
	}
	for _, o := range []string{"soft", "softerr"} {
		if _, ok := m.Options[o]; ok {
			out = append(out, Problem{Option: o,
				Why: "a request that times out fails instead of being retried: the WAL fails safe (nothing is acked) but for good, and the broker stops serving until restarted; prefer hard"})
		}
	}
	return out
}

// major is the major version of an NFS vers= option ("4.1": 4), 0 when there is none.
func major(vers string) int {
	s, _, _ := strings.Cut(vers, ".")
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0
	}
	return n
}

// Result is what CheckPath found for one path.
type Result struct {
	Path     string // as given
	Resolved string // absolute, symlinks resolved (of its nearest existing ancestor)
	Mount    Mount
	Problems []Problem
}

// Err is nil, or ErrUnsafe wrapped with every fatal problem: which option and why.
func (r Result) Err() error {
	var msgs []string
	for _, p := range r.Problems {
		if p.Fatal {
			msgs = append(msgs, p.String())
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s is on %s (%s at %s): %s", ErrUnsafe, r.Path, r.Mount.Source, r.Mount.FSType, r.Mount.Point, strings.Join(msgs, "; "))
}

// Warnings lists the problems that do not refuse a start.
func (r Result) Warnings() []Problem {
	var out []Problem
	for _, p := range r.Problems {
		if !p.Fatal {
			out = append(out, p)
		}
	}
	return out
}

// CheckPath finds the mount holding path (which need not exist yet: its nearest
// existing ancestor is resolved) in the mountinfo file and checks it.
func CheckPath(path, mountinfo string) (Result, error) {
	res := Result{Path: path}
	resolved, err := resolve(path)
	if err != nil {
		return res, err
	}
	res.Resolved = resolved
	f, err := os.Open(mountinfo)
	if err != nil {
		return res, fmt.Errorf("mountcheck: %w", err)
	}
	defer f.Close()
	mounts, err := Parse(f)
	if err != nil {
		return res, err
	}
	m, ok := Find(mounts, resolved)
	if !ok {
		return res, fmt.Errorf("mountcheck: no mount in %s holds %s", mountinfo, resolved)
	}
	res.Mount, res.Problems = m, Check(m)
	return res, nil
}

// resolve makes path absolute and resolves the symlinks of its nearest existing
// ancestor; the part that does not exist yet is appended as it is.
func resolve(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("mountcheck: %w", err)
	}
	rest := ""
	for dir := abs; ; {
		r, err := filepath.EvalSymlinks(dir)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("mountcheck: resolving %s: %w", path, err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}
