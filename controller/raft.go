package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/weir-io/weir/internal/datamode"
)

// raftNode is the Raft side of a controller: stores, transport and the raft instance.
type raftNode struct {
	bolt      *raftboltdb.BoltStore // nil when the log and stable stores were injected
	logs      raft.LogStore
	stable    raft.StableStore
	snaps     raft.SnapshotStore
	transport raft.Transport
	addr      net.Addr // bound Raft address
	raft      *raft.Raft
}

// openRaftStores opens the stores and the transport the config does not inject: the
// bolt log+stable store and the snapshot store under dataDir, and the bound TCP
// transport (New; raft itself starts in Start).
func openRaftStores(cfg *Config, hlog hclog.Logger) (*raftNode, error) {
	n := &raftNode{logs: cfg.LogStore, stable: cfg.StableStore, snaps: cfg.SnapshotStore}
	if n.logs == nil || n.stable == nil || n.snaps == nil {
		if err := os.MkdirAll(cfg.DataDir, datamode.DirMode); err != nil {
			return nil, fmt.Errorf("controller: %w", err)
		}
		// The Raft log and snapshots hold the SCRAM salts and keys: warn when others may
		// read them (raft.db itself is created 0600 by raft-boltdb).
		datamode.Check(cfg.Logger, "controller Raft data", cfg.DataDir, filepath.Join(cfg.DataDir, "raft.db"), filepath.Join(cfg.DataDir, "snapshots"))
	}
	if n.logs == nil || n.stable == nil {
		store, err := raftboltdb.NewBoltStore(filepath.Join(cfg.DataDir, "raft.db"))
		if err != nil {
			return nil, fmt.Errorf("controller: open raft.db: %w", err)
		}
		n.bolt = store
		if n.logs == nil {
			n.logs = store
		}
		if n.stable == nil {
			n.stable = store
		}
	}
	if n.snaps == nil {
		snapDir := filepath.Join(cfg.DataDir, "snapshots")
		_, statErr := os.Stat(snapDir)
		snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, hlog.Named("snapshots"))
		if err != nil {
			n.closeBolt()
			return nil, fmt.Errorf("controller: snapshot store: %w", err)
		}
		if errors.Is(statErr, fs.ErrNotExist) {
			// raft makes it 0755: made private here, the snapshots inside are out of
			// other users' reach whatever their own mode.
			if err := os.Chmod(snapDir, datamode.DirMode); err != nil {
				n.closeBolt()
				return nil, fmt.Errorf("controller: snapshot store: %w", err)
			}
		}
		n.snaps = privateSnapshots{FileSnapshotStore: snaps, dir: snapDir, log: cfg.Logger}
	}
	if cfg.RaftTransport != nil {
		n.transport = cfg.RaftTransport
		n.addr = transportAddr(cfg.RaftTransport.LocalAddr())
		return n, nil
	}
	advertise, err := net.ResolveTCPAddr("tcp", cfg.peer(cfg.NodeID).RaftAddr)
	if err != nil {
		n.closeBolt()
		return nil, fmt.Errorf("controller: raft advertise address: %w", err)
	}
	if cfg.RaftListener == nil && cfg.RaftTLS {
		// Mutual TLS needs our own stream layer, so a listener of our own too.
		ln, err := net.Listen("tcp", cfg.RaftAddr)
		if err != nil {
			n.closeBolt()
			return nil, fmt.Errorf("controller: raft listen %s: %w", cfg.RaftAddr, err)
		}
		cfg.RaftListener = ln
	}
	if cfg.RaftListener != nil {
		stream, err := newStreamLayer(cfg, advertise)
		if err != nil {
			n.closeBolt()
			return nil, err
		}
		n.addr = cfg.RaftListener.Addr()
		n.transport = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream:  stream,
			MaxPool: 3,
			Timeout: 10 * time.Second,
			Logger:  hlog.Named("transport"),
		})
		return n, nil
	}
	trans, err := raft.NewTCPTransportWithLogger(cfg.RaftAddr, advertise, 3, 10*time.Second, hlog.Named("transport"))
	if err != nil {
		n.closeBolt()
		return nil, fmt.Errorf("controller: raft transport on %s: %w", cfg.RaftAddr, err)
	}
	n.transport = trans
	n.addr = advertise
	if a, err := net.ResolveTCPAddr("tcp", string(trans.LocalAddr())); err == nil {
		n.addr = a
	}
	return n, nil
}

// transportAddr is an injected transport's address: whatever string it routes by,
// not necessarily host:port (an in-memory transport's is any name).
type transportAddr raft.ServerAddress

func (a transportAddr) Network() string { return "raft" }
func (a transportAddr) String() string  { return string(a) }

// start creates the raft instance and bootstraps the static quorum if there is no state.
func (n *raftNode) start(cfg *Config, fsm raft.FSM, hlog hclog.Logger, notify chan<- bool) error {
	rc := raft.DefaultConfig()
	rc.LocalID = serverID(cfg.NodeID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.NotifyCh = notify
	rc.Logger = hlog.Named("raft")
	rc.NoLegacyTelemetry = true
	if err := raft.ValidateConfig(rc); err != nil {
		return fmt.Errorf("controller: raft config: %w", err)
	}
	logs := n.logs
	if cached, err := raft.NewLogCache(512, n.logs); err == nil {
		logs = cached
	}
	existing, err := raft.HasExistingState(logs, n.stable, n.snaps)
	if err != nil {
		return fmt.Errorf("controller: raft state: %w", err)
	}
	r, err := raft.NewRaft(rc, fsm, logs, n.stable, n.snaps, n.transport)
	if err != nil {
		return fmt.Errorf("controller: start raft: %w", err)
	}
	n.raft = r
	if !existing {
		var servers []raft.Server
		for _, p := range cfg.Peers {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: serverID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
		}
		// Every controller bootstraps with the same configuration; raft accepts that.
		if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil && err != raft.ErrCantBootstrap {
			return fmt.Errorf("controller: bootstrap: %w", err)
		}
	}
	return nil
}

// close shuts raft down, then the transport and the bolt store (injected stores are
// the caller's). Safe on a partial start.
func (n *raftNode) close() error {
	var first error
	if n.raft != nil {
		if err := n.raft.Shutdown().Error(); err != nil {
			first = err
		}
	}
	// Raft's shutdown closed the transport already if it started; a transport that
	// never reached raft (New failed, Start never ran) is closed here.
	if err := closeTransport(n.transport); err != nil && first == nil {
		first = err
	}
	if err := n.closeBolt(); err != nil && first == nil {
		first = err
	}
	return first
}

func (n *raftNode) closeBolt() error {
	if n.bolt == nil {
		return nil
	}
	return n.bolt.Close()
}

// closeTransport closes t if it can be closed; both of ours tolerate a second Close.
func closeTransport(t raft.Transport) error {
	if c, ok := t.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

func serverID(id int32) raft.ServerID { return raft.ServerID(strconv.Itoa(int(id))) }

func parseServerID(id raft.ServerID) (int32, bool) {
	n, err := strconv.ParseInt(string(id), 10, 32)
	return int32(n), err == nil
}

// streamLayer is a raft.StreamLayer over a listener the caller bound already; dial,
// when set, replaces the plain TCP dial (mutual TLS, raft_tls.go).
type streamLayer struct {
	net.Listener
	advertise net.Addr
	dial      func(addr string, timeout time.Duration) (net.Conn, error)
}

func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if s.dial != nil {
		return s.dial(string(addr), timeout)
	}
	return net.DialTimeout("tcp", string(addr), timeout)
}

func (s *streamLayer) Addr() net.Addr { return s.advertise }

// hclogAdapter sends hclog (raft's logger) to slog.
type hclogAdapter struct {
	l     *slog.Logger
	name  string
	args  []any
	level hclog.Level
}

func newHCLog(l *slog.Logger) hclog.Logger {
	if l == nil {
		return hclog.NewNullLogger()
	}
	return &hclogAdapter{l: l, level: hclog.Info}
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off || (level != hclog.NoLevel && level < a.level) {
		return
	}
	var sl slog.Level
	switch level {
	case hclog.Trace, hclog.Debug:
		sl = slog.LevelDebug
	case hclog.Warn:
		sl = slog.LevelWarn
	case hclog.Error:
		sl = slog.LevelError
	default:
		sl = slog.LevelInfo
	}
	if !a.l.Enabled(context.Background(), sl) {
		return
	}
	all := make([]any, 0, len(a.args)+len(args)+2)
	if a.name != "" {
		all = append(all, "component", a.name)
	}
	all = append(all, a.args...)
	all = append(all, args...)
	for i, v := range all {
		if f, ok := v.(hclog.Format); ok && len(f) > 0 { // hclog.Fmt("%+v", x)
			if format, ok := f[0].(string); ok {
				all[i] = fmt.Sprintf(format, f[1:]...)
			}
		}
	}
	a.l.Log(context.Background(), sl, msg, all...)
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }
func (a *hclogAdapter) IsTrace() bool                 { return a.level <= hclog.Trace }
func (a *hclogAdapter) IsDebug() bool                 { return a.level <= hclog.Debug }
func (a *hclogAdapter) IsInfo() bool                  { return a.level <= hclog.Info }
func (a *hclogAdapter) IsWarn() bool                  { return a.level <= hclog.Warn }
func (a *hclogAdapter) IsError() bool                 { return a.level <= hclog.Error }
func (a *hclogAdapter) ImpliedArgs() []any            { return a.args }
func (a *hclogAdapter) Name() string                  { return a.name }
func (a *hclogAdapter) SetLevel(l hclog.Level)        { a.level = l }
func (a *hclogAdapter) GetLevel() hclog.Level         { return a.level }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	c := *a
	c.args = append(append([]any(nil), a.args...), args...)
	return &c
}

func (a *hclogAdapter) Named(name string) hclog.Logger {
	c := *a
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *a
	c.name = name
	return &c
}

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return lineWriter{a}
}

type lineWriter struct{ a *hclogAdapter }

func (w lineWriter) Write(p []byte) (int, error) {
	w.a.Info(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// privateSnapshots makes every snapshot raft's file store writes private (0700
// directory, 0600 files) once it is complete: the store creates them 0755 and with the
// umask (0644), and they hold the SCRAM salts and keys.
type privateSnapshots struct {
	*raft.FileSnapshotStore
	dir string
	log *slog.Logger
}

func (p privateSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := p.FileSnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	return privateSink{SnapshotSink: sink, dir: filepath.Join(p.dir, sink.ID()), log: p.log}, nil
}

type privateSink struct {
	raft.SnapshotSink
	dir string // where the store moves the snapshot on Close
	log *slog.Logger
}

func (s privateSink) Close() error {
	if err := s.SnapshotSink.Close(); err != nil {
		return err
	}
	err := filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := datamode.FileMode
		if d.IsDir() {
			mode = datamode.DirMode
		}
		return os.Chmod(path, mode)
	})
	if err != nil && s.log != nil {
		// The snapshot is written and usable; only its mode is looser than wanted.
		s.log.Warn("could not make a Raft snapshot private", "dir", s.dir, "err", err)
	}
	return nil
}
