package controller

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// Controller is one member of the Raft quorum that owns the cluster metadata, serving
// the controller API.
type Controller struct {
	cfg     Config
	log     *slog.Logger
	hlog    hclog.Logger
	fsm     *FSM
	node    *raftNode
	r       atomic.Pointer[raft.Raft]
	apiLn   net.Listener
	srv     *http.Server
	fwd     *http.Client
	auth    *apiAuth // API authentication and TLS (auth.go)
	leases  *leaseTable
	votes   *voteLog // fence votes on disk (votelog.go); nil with injected Raft stores
	hbConns sync.Map // net.Conn → broker ID: connections heartbeats came on (leasevote.go)
	loads   *loadTable
	bal     *balancer
	metrics *metrics
	notify  chan bool

	// adminMu serialises topic administration on the leader: validation and placement
	// read the View, so the next admin command waits until the previous one applied.
	adminMu sync.Mutex
	// regMu serialises broker registrations on the leader (the duplicate-process check
	// reads the View and the leases, then proposes).
	regMu sync.Mutex

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	startOnce sync.Once
	closeOnce sync.Once
	closeErr  error
}

// New validates cfg, opens the Raft stores under cfg.DataDir and binds the Raft and API
// listeners (stores and transport the config injects are used as they are). Nothing is
// served before Start.
func New(cfg Config) (*Controller, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("controller", cfg.NodeID)
	ctx, cancel := context.WithCancel(context.Background())
	c := &Controller{
		cfg:    cfg,
		log:    log,
		hlog:   newHCLog(cfg.Logger),
		fsm:    NewFSM(log),
		loads:  newLoadTable(),
		notify: make(chan bool, 16),
		ctx:    ctx,
		cancel: cancel,
		fwd: &http.Client{Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
		}},
	}
	c.bal = &balancer{c: c}
	if cfg.Logger != nil {
		c.hlog = c.hlog.With("controller", cfg.NodeID)
	}
	fail := func(err error) (*Controller, error) {
		cancel()
		if c.node != nil {
			c.node.close()
		} else if cfg.RaftListener != nil {
			cfg.RaftListener.Close()
		} else {
			closeTransport(cfg.RaftTransport)
		}
		if c.apiLn != nil {
			c.apiLn.Close()
		} else if cfg.APIListener != nil {
			cfg.APIListener.Close()
		}
		return nil, err
	}
	node, err := openRaftStores(&c.cfg, c.hlog)
	if err != nil {
		return fail(err)
	}
	c.node = node
	if cfg.LogStore == nil {
		// Next to raft.db: the votes must survive exactly as long as the Raft state.
		if c.votes, err = openVoteLog(c.cfg.DataDir); err != nil {
			return fail(err)
		}
	}
	c.leases = newLeaseTable(time.Now(), c.votes)
	if cfg.APIListener != nil {
		c.apiLn = cfg.APIListener
	} else if c.apiLn, err = net.Listen("tcp", c.cfg.APIAddr); err != nil {
		return fail(fmt.Errorf("controller: listen %s: %w", c.cfg.APIAddr, err))
	}
	if err := c.setupAuth(); err != nil {
		return fail(err)
	}
	if c.metrics, err = newMetrics(cfg.Registerer, c); err != nil {
		return fail(fmt.Errorf("controller: metrics: %w", err))
	}
	c.srv = &http.Server{
		Handler:           c.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnContext:       func(ctx context.Context, nc net.Conn) context.Context { return context.WithValue(ctx, connKey{}, nc) },
		ConnState:         c.connState,
	}
	return c, nil
}

// Start starts Raft (bootstrapping the static quorum on first start) and serves the API.
func (c *Controller) Start() error {
	err := ErrClosed
	c.startOnce.Do(func() {
		if c.ctx.Err() != nil {
			return
		}
		if err = c.node.start(&c.cfg, c.fsm, c.hlog, c.notify); err != nil {
			return
		}
		c.r.Store(c.node.raft)
		c.wg.Add(3)
		go func() {
			defer c.wg.Done()
			if err := c.srv.Serve(c.apiLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				c.log.Error("controller API stopped", "err", err)
			}
		}()
		go c.leadershipLoop()
		go c.leaseLoop()
		if c.cfg.Balance {
			c.wg.Add(1)
			go c.bal.loop()
		}
		c.log.Info("controller started", "raft", c.RaftAddr().String(), "api", c.Addr().String(), "peers", c.cfg.Peers.String())
	})
	return err
}

// Close stops serving, shuts Raft down and closes the stores. Safe to call twice.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.srv.Close()
		c.apiLn.Close()
		c.closeErr = c.node.close()
		c.wg.Wait()
		if c.votes != nil {
			c.votes.close()
		}
		c.fwd.CloseIdleConnections()
		c.metrics.unregister()
	})
	return c.closeErr
}

// Addr is the bound API address.
func (c *Controller) Addr() net.Addr { return c.apiLn.Addr() }

// RaftAddr is the bound Raft address.
func (c *Controller) RaftAddr() net.Addr { return c.node.addr }

// View returns this controller's current View of the metadata (possibly behind the
// leader's on a follower).
func (c *Controller) View() *metadata.View { return c.fsm.View() }

// IsLeader reports whether this controller is the Raft leader.
func (c *Controller) IsLeader() bool { return c.raftState() == raft.Leader }

// Status describes this controller's Raft state.
func (c *Controller) Status() ctlwire.Status {
	v := c.fsm.View()
	st := ctlwire.Status{ID: c.cfg.NodeID, State: "Starting", LeaderID: -1, Version: v.Version, ClusterID: v.ClusterID, Peers: c.cfg.Peers,
		AuthRequired: c.auth != nil && c.auth.required()}
	r := c.r.Load()
	if r == nil {
		return st
	}
	st.State = r.State().String()
	st.Term = r.CurrentTerm()
	st.CommitIndex = r.CommitIndex()
	st.AppliedIndex = r.AppliedIndex()
	st.LastLogIndex = r.LastIndex()
	if n, err := strconv.ParseUint(r.Stats()["last_snapshot_index"], 10, 64); err == nil {
		st.LastSnapshotIndex = n
	}
	if id, api, ok := c.leader(); ok {
		st.LeaderID, st.LeaderAPI = id, api
	}
	return st
}

func (c *Controller) raftState() raft.RaftState {
	r := c.r.Load()
	if r == nil {
		return raft.Shutdown
	}
	return r.State()
}

func (c *Controller) withRaft(f func(*raft.Raft) uint64) uint64 {
	if r := c.r.Load(); r != nil {
		return f(r)
	}
	return 0
}

// leader returns the Raft leader's ID and API address, if one is known.
func (c *Controller) leader() (int32, string, bool) {
	r := c.r.Load()
	if r == nil {
		return -1, "", false
	}
	_, sid := r.LeaderWithID()
	if sid == "" {
		return -1, "", false
	}
	id, ok := parseServerID(sid)
	if !ok {
		return -1, "", false
	}
	p := c.cfg.peer(id)
	if p == nil {
		return -1, "", false
	}
	return id, p.APIAddr, true
}

// propose replicates cmd and returns its result once applied on this (leader) node.
// A deterministic refusal comes back as both a result and its error.
func (c *Controller) propose(cmd command) (*applyResult, error) {
	r := c.r.Load()
	if r == nil || c.ctx.Err() != nil {
		return nil, ctlwire.ErrUnavailable
	}
	if r.State() != raft.Leader {
		return nil, ctlwire.ErrNotLeader
	}
	data, err := encodeCommand(cmd)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	f := r.Apply(data, c.cfg.ApplyTimeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return nil, ctlwire.ErrNotLeader // never entered the log
		}
		return nil, fmt.Errorf("%w: %v", ctlwire.ErrUnavailable, err)
	}
	c.metrics.applyDuration.Observe(time.Since(start).Seconds())
	res, ok := f.Response().(*applyResult)
	if !ok {
		return nil, ctlwire.ErrInternal
	}
	return res, res.Err
}

// leadershipLoop follows Raft leadership: a new leader forgets the load reports of an
// earlier leadership and makes sure the cluster has an ID. Leases need nothing: every
// controller keeps its own (leases.go), so a new leader knows the brokers' silences.
func (c *Controller) leadershipLoop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case leader := <-c.notify:
			if !leader {
				c.log.Info("lost leadership")
				c.loads.reset()
				continue
			}
			c.log.Info("became leader")
			c.loads.reset()
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				if err := c.ensureClusterID(); err != nil && c.ctx.Err() == nil {
					c.log.Warn("could not set the cluster ID yet", "err", err)
				}
			}()
		}
	}
}

// ensureClusterID proposes the cluster ID if the (caught-up) state has none.
func (c *Controller) ensureClusterID() error {
	r := c.r.Load()
	if r == nil || r.State() != raft.Leader {
		return ctlwire.ErrNotLeader
	}
	if err := r.Barrier(c.cfg.ApplyTimeout).Error(); err != nil {
		return fmt.Errorf("%w: %v", ctlwire.ErrUnavailable, err)
	}
	if c.fsm.View().ClusterID != "" {
		return nil
	}
	_, err := c.propose(&initClusterCmd{ClusterID: newClusterID()})
	return err
}

// leaseLoop fences brokers whose lease expired (leader only), once a majority of the
// controllers voted for it (leasevote.go); every controller drops the leases of
// registrations that are over.
func (c *Controller) leaseLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.LeaseCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		v := c.fsm.View()
		c.leases.forget(v)
		if !c.IsLeader() {
			continue
		}
		for _, f := range c.leases.expired(v, time.Now(), c.cfg.fenceAfter()) {
			start := time.Now()
			ok, votes := c.fenceVotes(c.ctx, f.ID, f.Epoch)
			if !ok {
				c.log.Info("not fencing broker yet: no majority of the controllers voted for it", "broker", f.ID, "epoch", f.Epoch, "votes", fmt.Sprint(votes))
				continue
			}
			res, err := c.propose(&f)
			if err != nil {
				c.log.Warn("fencing broker failed", "broker", f.ID, "epoch", f.Epoch, "err", err)
				continue
			}
			if fr, _ := res.Value.(fenceResult); fr.Fenced {
				c.metrics.fenced.Inc()
				c.metrics.failedOver.Add(float64(fr.FailedOver + fr.Leaderless))
				c.log.Warn("fenced broker: lease expired; its partitions fail over", "broker", f.ID, "epoch", f.Epoch,
					"failed_over", fr.FailedOver, "leaderless", fr.Leaderless, "moves_cancelled", fr.MovesCancelled,
					"votes", fmt.Sprint(votes), "plan_duration", time.Since(start))
			}
		}
	}
}

func newClusterID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return strings.TrimRight(base64.URLEncoding.EncodeToString(b[:]), "=")
}
