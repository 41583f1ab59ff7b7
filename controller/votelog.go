package controller

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// voteLogFile, in a controller's DataDir, lists the broker registrations the controller
// voted to fence, one "<broker id> <epoch>" line each, appended and synced before the
// vote is answered. A controller that restarted must go on refusing them: its vote
// was counted for a fence that may not have been committed yet when it restarted, and
// acknowledging that registration's heartbeats again could give the broker a lease
// after the fence (leases.go). Lines of one registration superseded by a later one
// stay (a few bytes per fence); the file is rewritten small at start-up when it has
// grown past voteLogCompactLines.
const voteLogFile = "lease-votes"

const voteLogCompactLines = 4096

// voteLog is the file of refusals.
type voteLog struct {
	mu    sync.Mutex
	path  string
	f     *os.File
	lines int
	seen  map[int32]int64 // highest refused epoch per broker
}

// openVoteLog reads (and reopens for appending) dir's vote log; a torn last line (a
// crash mid-append, never answered) is ignored.
func openVoteLog(dir string) (*voteLog, error) {
	l := &voteLog{path: filepath.Join(dir, voteLogFile), seen: map[int32]int64{}}
	b, err := os.ReadFile(l.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("controller: reading %s: %w", l.path, err)
	}
	if i := bytes.LastIndexByte(b, '\n'); i+1 < len(b) {
		b = b[:i+1] // a torn last line: never synced, so never answered
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		id, epoch, ok := parseVoteLine(sc.Text())
		if !ok {
			continue
		}
		l.lines++
		l.seen[id] = max(l.seen[id], epoch)
	}
	if l.lines > voteLogCompactLines {
		if err := l.rewrite(); err != nil {
			return nil, err
		}
	}
	if l.f, err = os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
		return nil, fmt.Errorf("controller: opening %s: %w", l.path, err)
	}
	return l, nil
}

func parseVoteLine(s string) (int32, int64, bool) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), " ")
	if !ok {
		return 0, 0, false
	}
	id, err1 := strconv.ParseInt(a, 10, 32)
	epoch, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || id < 0 || epoch <= 0 {
		return 0, 0, false
	}
	return int32(id), epoch, true
}

// rewrite replaces the file with one line per broker (its highest refused epoch).
func (l *voteLog) rewrite() error {
	var sb strings.Builder
	for id, e := range l.seen {
		fmt.Fprintf(&sb, "%d %d\n", id, e)
	}
	tmp := l.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("controller: compacting %s: %w", l.path, err)
	}
	_, err = f.WriteString(sb.String())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, l.path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(l.path))
	}
	if err != nil {
		return fmt.Errorf("controller: compacting %s: %w", l.path, err)
	}
	l.lines = len(l.seen)
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// refused returns the refusals read at start.
func (l *voteLog) refused() map[int32]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int32]int64, len(l.seen))
	for id, e := range l.seen {
		out[id] = e
	}
	return out
}

// record appends and syncs a refusal of broker id's registrations up to epoch.
func (l *voteLog) record(id int32, epoch int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[id] >= epoch {
		return nil
	}
	if _, err := fmt.Fprintf(l.f, "%d %d\n", id, epoch); err != nil {
		return fmt.Errorf("controller: writing %s: %w", l.path, err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("controller: syncing %s: %w", l.path, err)
	}
	l.seen[id] = epoch
	l.lines++
	return nil
}

func (l *voteLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}
