//go:build linux

// Package sysfile holds the file system calls Go's os package lacks, made on an
// *os.File's descriptor: Call (any of them, retried while interrupted) and WriteBack
// (sync_file_range: background writers, the WAL's zero-fill of its next segment and the
// local object store's puts, write back step by step so a group commit's fdatasync
// never queues behind megabytes of their writeback; no durability guarantee, fsync
// still is).
package sysfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// Call runs call on f's descriptor, again while it is interrupted (EINTR), and returns
// its error as an *os.PathError naming op (nil if it succeeded).
func Call(f *os.File, op string, call func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = call(int(fd)); serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: op, Path: f.Name(), Err: serr}
	}
	return nil
}

// WriteBack writes [off, off+n) of f back to the device and waits for it.
func WriteBack(f *os.File, off, n int64) error {
	return Call(f, "sync_file_range", func(fd int) error {
		return unix.SyncFileRange(fd, off, n,
			unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
	})
}
