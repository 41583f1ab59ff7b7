//go:build linux

package wal

import (
	"errors"
	"io"
	"os"

	"github.com/weir-io/weir/internal/sysfile"
	"golang.org/x/sys/unix"
)

// OUncached is the OpenFile flag that bypasses the client's page cache (O_DIRECT);
// see ReadUncached.
const OUncached = unix.O_DIRECT

// readOnce is one pread(2): O_DIRECT refuses the unaligned retry os.File.ReadAt makes
// after a short read.
func (f *osFile) readOnce(p []byte, off int64) (int, error) {
	var n int
	err := sysfile.Call(f.File, "pread", func(fd int) error {
		var err error
		n, err = unix.Pread(fd, p, off)
		return err
	})
	if err == nil && n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return max(n, 0), err
}

func fdatasync(f *os.File) error {
	return sysfile.Call(f, "fdatasync", unix.Fdatasync)
}

func fallocate(f *os.File, size int64) error {
	err := sysfile.Call(f, "fallocate", func(fd int) error { return unix.Fallocate(fd, 0, 0, size) })
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: errors.ErrUnsupported}
	}
	return err
}

func isQuotaError(err error) bool { return errors.Is(err, unix.EDQUOT) }

func osFlags(flag int) int { return flag }

// sharedPageCache reports whether dir is on a local file system whose one kernel page
// cache every reader of it uses (ext4, XFS, Btrfs, tmpfs, F2FS): a page there is never
// stale, so a fresh open and a cached read see every write at once, and the fence check
// need not pay a device read per group commit (O_DIRECT). NFS, FUSE (the FSx-like lab)
// and anything unknown answer false: each host has a cache of its own.
func sharedPageCache(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false
	}
	switch uint64(st.Type) {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC, unix.F2FS_SUPER_MAGIC:
		return true
	}
	return false
}
