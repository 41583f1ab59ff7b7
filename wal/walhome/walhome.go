// Package walhome owns the layout of a broker's WAL home on the shared file system and
// everything done to it by epoch: which directories exist, fencing and sealing every
// epoch up to a fenced one, and deleting sealed directories nothing needs.
//
// A broker's WAL home is <wal-root>/broker-<id> in a cluster (HomeDir) or <data-dir>/wal
// standalone. Every registration epoch writes a WAL directory of its own there,
// epoch-<020d>: a new process never appends to files an earlier process of the same
// broker may still write (a zombie hung in NFS I/O, a pod force-deleted but still
// running). Segment files directly in the home are a WAL written before epochs had
// directories; it is read as epoch 0. The home also holds the broker's epoch fence token
// (wal.EpochFence, file FENCED-EPOCH), which is never removed.
//
// The fence never depends on a directory listing (an NFS client's listing may be stale,
// and an owner may not have created its directory yet): SealUpTo marks the token first
// and then fences and seals every epoch up to the fenced one by name, creating what is
// missing; the owner's wal.Open writes its owner record and then reads the token. See
// wal/doc.go, Fencing, for the argument.
package walhome

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/weir-io/weir/wal"
)

const (
	// EpochDirPrefix starts the name of an epoch's WAL directory.
	EpochDirPrefix = "epoch-"
	// TokenFile is the epoch fence token's name in a home.
	TokenFile  = "FENCED-EPOCH"
	homePrefix = "broker-"
)

// EpochDirName is the name of epoch e's WAL directory.
func EpochDirName(e int64) string { return fmt.Sprintf("%s%020d", EpochDirPrefix, e) }

// EpochDir is the path of epoch e's WAL directory in home (epoch 0: home itself).
func EpochDir(home string, e int64) string {
	if e == 0 {
		return home
	}
	return filepath.Join(home, EpochDirName(e))
}

// HomeDir is broker id's home under the shared WAL root.
func HomeDir(root string, id int32) string {
	return filepath.Join(root, fmt.Sprintf("%s%d", homePrefix, id))
}

// ParseHomeName returns the broker ID a home's name (broker-<id>) names.
func ParseHomeName(name string) (int32, bool) {
	rest, ok := strings.CutPrefix(name, homePrefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 32)
	if err != nil || id < 0 || strconv.FormatInt(id, 10) != rest {
		return 0, false
	}
	return int32(id), true
}

// TokenPath is the path of the epoch fence token of home.
func TokenPath(home string) string { return filepath.Join(home, TokenFile) }

// ReadToken reads home's epoch fence token (uncached).
func ReadToken(fsys wal.FS, home string) (wal.EpochFence, error) {
	return wal.ReadEpochFence(fsys, TokenPath(home))
}

// Dir is one WAL directory of a home.
type Dir struct {
	Epoch int64
	Path  string
}

// List lists home's WAL directories, oldest first: the legacy one (epoch 0) if segments
// lie directly in home, then epoch-<N>. A home that does not exist has none. A listing
// may be stale (NFS): use it as a hint only; Dirs adds what the token says exists.
func List(fsys wal.FS, home string) ([]Dir, error) {
	ents, err := fsys.ReadDir(home)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("walhome: listing %s: %w", home, err)
	}
	var out []Dir
	legacy := false
	for _, e := range ents {
		name := e.Name()
		if rest, ok := strings.CutPrefix(name, EpochDirPrefix); ok && e.IsDir() {
			n, err := strconv.ParseInt(rest, 10, 64)
			if err != nil || n <= 0 {
				continue
			}
			out = append(out, Dir{Epoch: n, Path: filepath.Join(home, name)})
			continue
		}
		if !e.IsDir() && strings.HasSuffix(name, ".wal") {
			legacy = true
		}
	}
	if legacy {
		out = append(out, Dir{Epoch: 0, Path: home})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Epoch < out[j].Epoch })
	return out, nil
}

// Dirs is every WAL directory of home of an epoch <= upTo (upTo <= 0: any), oldest
// first: what List shows, plus, looked up by name, every epoch the token fences that
// the listing misses and the GC has not collected. A fenced epoch's directory exists
// once SealUpTo returned (it creates missing ones), so a reader that sealed first
// reads every fenced directory, however stale its listing.
func Dirs(fsys wal.FS, home string, upTo int64) ([]Dir, error) {
	if upTo <= 0 {
		upTo = math.MaxInt64
	}
	listed, err := List(fsys, home)
	if err != nil {
		return nil, err
	}
	ef, err := ReadToken(fsys, home)
	if err != nil {
		return nil, fmt.Errorf("walhome: %w", err)
	}
	seen := map[int64]bool{}
	var out []Dir
	for _, d := range listed {
		if d.Epoch <= upTo {
			seen[d.Epoch] = true
			out = append(out, d)
		}
	}
	for e := int64(1); e <= min(ef.Max, upTo); e++ {
		if seen[e] || ef.State(e)&wal.EpochCollected != 0 {
			continue
		}
		d := Dir{Epoch: e, Path: EpochDir(home, e)}
		switch ok, err := exists(fsys, d.Path); {
		case err != nil:
			return nil, err
		case ok:
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Epoch < out[j].Epoch })
	return out, nil
}

// exists looks a WAL directory up by name: every directory the WAL or a taker creates
// holds FENCE, and a lookup by name goes to the server.
func exists(fsys wal.FS, dir string) (bool, error) {
	f, err := fsys.OpenFile(filepath.Join(dir, wal.FenceFile), os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("walhome: looking up %s: %w", dir, err)
	}
	f.Close()
	return true, nil
}

// NextLocalEpoch is a standalone broker's epoch: one more than any directory in its home
// and any epoch its token fences (a cluster broker's is its registration epoch).
func NextLocalEpoch(fsys wal.FS, home string) (int64, error) {
	dirs, err := List(fsys, home)
	if err != nil {
		return 0, err
	}
	ef, err := ReadToken(fsys, home)
	if err != nil {
		return 0, fmt.Errorf("walhome: %w", err)
	}
	n := ef.Max
	if len(dirs) > 0 {
		n = max(n, dirs[len(dirs)-1].Epoch)
	}
	return n + 1, nil
}

// SealOptions adjust SealUpTo.
type SealOptions struct {
	// By names the taker in FENCE and SEAL (at most wal.MaxFenceName bytes).
	By string
	// AcceptCorrupt fences a directory that cannot be sealed because it is damaged
	// (wal.ErrCorrupt) instead of failing: an operator accepted the loss.
	AcceptCorrupt bool
	// Log receives what was sealed; nil discards.
	Log *slog.Logger
}

// SealUpTo fences and seals every WAL directory of home of an epoch <= epoch:
//
//  1. mark the token fenced up to epoch, synced: from here on no owner of such an
//     epoch passes wal.Open (it reads the token after writing its owner record);
//  2. for every epoch e in 1..epoch that the token does not record as sealed, seal
//     epoch-e BY NAME (wal.Seal: FENCE first, creating the directory if missing, an
//     empty directory gets a SEAL with end 0), then record it sealed; the legacy
//     directory (epoch 0) too if List shows segments in home.
//
// An owner that opened before step 1 wrote its owner record into the FENCE that step 2
// fences, so its next group commit finds the fence; one that opens after step 1 is
// refused. After SealUpTo returns no owner of an epoch <= epoch can ack anything, and
// every such directory exists (or was collected) and is sealed. Idempotent; several
// takers may run it at once.
func SealUpTo(fsys wal.FS, home string, epoch int64, opts SealOptions) error {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if epoch >= 1 {
		if err := wal.MarkEpochs(fsys, TokenPath(home), wal.EpochMark{Epoch: epoch, State: wal.EpochFenced}); err != nil {
			return fmt.Errorf("walhome: fencing epochs up to %d of %s: %w", epoch, home, err)
		}
	}
	ef, err := ReadToken(fsys, home)
	if err != nil {
		return fmt.Errorf("walhome: %w", err)
	}
	listed, err := List(fsys, home)
	if err != nil {
		return err
	}
	var dirs []Dir
	for _, d := range listed {
		// The legacy directory, and a collected one that is back (an owner's refused
		// Open recreated it, fenced): the listing is only a hint for these.
		if d.Epoch == 0 || (d.Epoch <= epoch && ef.State(d.Epoch)&wal.EpochCollected != 0) {
			dirs = append(dirs, d)
		}
	}
	for e := int64(1); e <= epoch; e++ {
		if ef.State(e)&(wal.EpochSealed|wal.EpochCollected) == 0 {
			dirs = append(dirs, Dir{Epoch: e, Path: EpochDir(home, e)})
		}
	}
	var sealed []wal.EpochMark
	for _, d := range dirs {
		if d.Epoch == 0 {
			if _, ok, err := wal.ReadSeal(fsys, d.Path); err != nil || ok {
				if err != nil {
					return err
				}
				continue
			}
		}
		info, err := wal.Seal(fsys, d.Path, opts.By)
		if err != nil && errors.Is(err, wal.ErrCorrupt) && opts.AcceptCorrupt {
			// A damaged WAL cannot be sealed (its end is unknown); fencing it still stops
			// its owner, and the loss was accepted: readers stop at the damage.
			log.Error("WAL damaged: fenced without a seal; what follows the damage is lost (--accept-wal-loss)", "dir", d.Path, "err", err)
			if err := wal.Fence(fsys, d.Path, opts.By); err != nil {
				return fmt.Errorf("walhome: fencing %s: %w", d.Path, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("walhome: sealing %s: %w", d.Path, err)
		}
		log.Info("sealed a WAL directory", "dir", d.Path, "owner_epoch", d.Epoch, "end", info.End)
		if d.Epoch > 0 && ef.State(d.Epoch)&wal.EpochCollected == 0 {
			sealed = append(sealed, wal.EpochMark{Epoch: d.Epoch, State: wal.EpochFenced | wal.EpochSealed})
		}
	}
	if len(sealed) > 0 {
		if err := wal.MarkEpochs(fsys, TokenPath(home), sealed...); err != nil {
			return fmt.Errorf("walhome: recording sealed epochs of %s: %w", home, err)
		}
	}
	return nil
}

// Remove deletes a sealed WAL directory that nothing needs: it records the epoch
// collected in the token, then removes the files, FENCE and SEAL last (a directory half
// deleted is still sealed and fenced), then the directory. The legacy WAL (epoch 0) is
// home itself: only its files go, never the epoch directories or the token. An owner
// whose wal.Open later recreates the directory is refused by the token (its epoch is
// fenced: it was sealed).
func Remove(fsys wal.FS, home string, d Dir) error {
	if _, ok, err := wal.ReadSeal(fsys, d.Path); err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("walhome: %s is not sealed: not removing it", d.Path)
		}
		return err
	}
	if d.Epoch > 0 {
		if err := wal.MarkEpochs(fsys, TokenPath(home), wal.EpochMark{Epoch: d.Epoch, State: wal.EpochFenced | wal.EpochSealed | wal.EpochCollected}); err != nil {
			return fmt.Errorf("walhome: %w", err)
		}
	}
	ents, err := fsys.ReadDir(d.Path)
	if err != nil {
		return fmt.Errorf("walhome: listing %s: %w", d.Path, err)
	}
	var last []string
	for _, e := range ents {
		if e.IsDir() || e.Name() == TokenFile {
			continue
		}
		p := filepath.Join(d.Path, e.Name())
		if strings.HasPrefix(e.Name(), wal.SealFile) || strings.HasPrefix(e.Name(), wal.FenceFile) {
			last = append(last, p)
			continue
		}
		if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("walhome: removing %s: %w", p, err)
		}
	}
	for _, p := range last {
		if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("walhome: removing %s: %w", p, err)
		}
	}
	if d.Epoch == 0 {
		return fsys.SyncDir(d.Path)
	}
	if err := fsys.Remove(d.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("walhome: removing %s: %w", d.Path, err)
	}
	return fsys.SyncDir(home)
}
