// Package datamode keeps what Weir stores on disk private to the user it runs as: WAL
// segments and objects hold the clients' messages, the controllers' Raft log and
// snapshots hold SCRAM salts, StoredKeys and ServerKeys (enough to impersonate a server
// to a client, and to mount an offline dictionary attack), metadata.json holds the
// same in single-broker mode. Directories are created DirMode and files FileMode;
// directories that already exist with looser modes (from older versions, or made by an
// operator) are left alone but warned about at start-up, once per directory, by Check.
package datamode

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
)

// DirMode and FileMode are the modes of data directories and files.
const (
	DirMode  fs.FileMode = 0o700
	FileMode fs.FileMode = 0o600
)

// Loose reports whether mode gives group or others any access.
func Loose(mode fs.FileMode) bool { return mode.Perm()&0o077 != 0 }

// Check stats each path and logs a warning for each one that exists with a mode giving
// group or others access; it returns those paths. what names the data in the warning
// (e.g. "controller Raft data"). Missing paths are skipped.
func Check(log *slog.Logger, what string, paths ...string) []string {
	var loose []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) || err != nil {
			continue
		}
		if Loose(st.Mode()) {
			loose = append(loose, p)
			if log != nil {
				want := FileMode
				if st.IsDir() {
					want = DirMode
				}
				log.Warn("data readable by other users: chmod it", "what", what, "path", p, "mode", st.Mode().Perm().String(), "want", want.String())
			}
		}
	}
	return loose
}
