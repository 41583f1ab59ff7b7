package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// applyResult is what FSM.Apply returns to the proposer (through the ApplyFuture).
type applyResult struct {
	// Version is the state's version after the command.
	Version uint64
	// Value is the command's answer (an epoch, a topic, the first producer ID, ...).
	Value any
	// Err is a deterministic refusal (e.g. metadata.ErrTopicExists); the state is unchanged.
	Err error
}

// published is one immutable View with its JSON encoding, made once on first use.
type published struct {
	view *metadata.View
	once sync.Once
	body []byte
}

func (p *published) json() []byte {
	p.once.Do(func() {
		b, err := json.Marshal(ctlwire.FromView(p.view))
		if err != nil { // cannot happen: plain data
			panic(fmt.Sprintf("controller: encode view: %v", err))
		}
		p.body = b
	})
	return p.body
}

// FSM is the metadata state machine. Raft calls Apply, Snapshot and Restore from its
// FSM goroutine; View, Changed and State are safe for concurrent use.
type FSM struct {
	log *slog.Logger

	mu      sync.Mutex // guards m and changed; a leaf lock
	m       *machine
	changed chan struct{}

	pub      atomic.Pointer[published]
	restores atomic.Int64
	steps    stepHistory // what each recent version changed: metadata deltas (delta.go)
}

// NewFSM returns an FSM with an empty state.
func NewFSM(log *slog.Logger) *FSM {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &FSM{log: log, m: newMachine(newState()), changed: make(chan struct{})}
	f.publishLocked()
	return f
}

// View returns the current immutable View (ControllerID -1).
func (f *FSM) View() *metadata.View { return f.pub.Load().view }

func (f *FSM) published() *published { return f.pub.Load() }

// Changed returns a channel closed at the next change of View.
func (f *FSM) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// State returns a copy of the state (topics shared, immutable).
func (f *FSM) State() State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m.st.shallowCopy()
}

func (f *FSM) publishLocked() {
	p := &published{view: f.m.st.view()}
	if old := f.pub.Load(); old != nil && old.view.Version+1 == p.view.Version {
		f.steps.record(old.view, p.view, f.m.st.ACLs)
	} else {
		f.steps.reset(f.m.st.ACLs)
	}
	f.pub.Store(p)
	close(f.changed)
	f.changed = make(chan struct{})
}

// Apply implements raft.FSM.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	return f.applyData(l.Data)
}

func (f *FSM) applyData(data []byte) (res *applyResult) {
	cmd, err := decodeCommand(data)
	if err != nil {
		// A newer controller's command, or corruption: every replica refuses it alike.
		f.log.Error("controller: refusing undecodable log entry", "err", err)
		return &applyResult{Version: f.View().Version, Err: err}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			f.log.Error("controller: command panicked", "type", cmd.kind(), "panic", r)
			res = &applyResult{Version: f.m.st.Version, Err: fmt.Errorf("%w: command %d: %v", ctlwire.ErrInternal, cmd.kind(), r)}
		}
	}()
	value, changed, err := cmd.apply(f.m)
	if err != nil {
		return &applyResult{Version: f.m.st.Version, Err: err}
	}
	if changed {
		f.m.st.Version++
		f.publishLocked()
	}
	return &applyResult{Version: f.m.st.Version, Value: value}
}

// Snapshot implements raft.FSM: a copy of the maps (topics are immutable), encoded
// later by Persist concurrently with Apply.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &fsmSnapshot{st: f.m.st.shallowCopy()}, nil
}

// Restore implements raft.FSM: replaces the whole state with the snapshot's.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st := newState()
	if err := json.NewDecoder(rc).Decode(&st); err != nil {
		return fmt.Errorf("controller: decode snapshot: %w", err)
	}
	for name, t := range st.Topics {
		if t == nil || t.Name != name {
			return fmt.Errorf("controller: snapshot: topic entry %q is inconsistent", name)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m = newMachine(st)
	f.publishLocked()
	f.restores.Add(1)
	return nil
}

// SnapshotFormatVersion is the version of the snapshot encoding, written as
// "format_version" before the State's fields. Snapshots written before the field existed
// have none and are version 1: adding it changed nothing else. A change that an older
// controller would misread bumps it, so that the older one refuses the snapshot
// (ErrSnapshotVersion) instead of restoring a wrong state.
const SnapshotFormatVersion = 1

// ErrSnapshotVersion: Restore was given a snapshot of a format version this build does
// not read, written by a newer controller.
var ErrSnapshotVersion = errors.New("controller: unsupported snapshot format version")

// snapshotFile is what Persist writes. Only encoded: State.UnmarshalJSON reads (and
// checks) the version, so Restore decodes into a State.
type snapshotFile struct {
	FormatVersion uint32 `json:"format_version"`
	State
}

type fsmSnapshot struct{ st State }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode(snapshotFile{FormatVersion: SnapshotFormatVersion, State: s.st}); err != nil {
		sink.Cancel()
		return fmt.Errorf("controller: write snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}
