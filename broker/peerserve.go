package broker

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/broker/peer"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/wal"
)

// peerServer answers other brokers' internal requests (broker/peer): links from zone
// proxies and their session fences, log-end queries, read replicas' follow requests. It runs on the connection's
// reader goroutine, so links of one connection reach the WAL in the order they came.
type peerServer struct{ b *Broker }

var _ kafka.InternalHandler = peerServer{}

func (ps peerServer) ServeInternal(body []byte, respond func([]byte)) {
	b := ps.b
	switch body[0] {
	case peer.OpLink:
		req, err := peer.DecodeLinkRequest(body)
		if err != nil {
			b.log.Warn("malformed link request", "err", err)
			respond(nil) // an empty answer: the proxy fails every link of it as lost
			return
		}
		b.serveLinks(req, respond)
	case peer.OpFenceLinks:
		req, err := peer.DecodeFenceRequest(body)
		if err != nil {
			b.log.Warn("malformed link fence request", "err", err)
			respond(nil)
			return
		}
		b.fenceLinks(req.Proxy, linkFence{epoch: req.Epoch, session: req.Session}, req.Parts, func(os []peer.Offsets) {
			respond(peer.AppendOffsets(nil, os))
		})
	case peer.OpOffsets:
		refs, err := peer.DecodeOffsetsRequest(body)
		if err != nil {
			b.log.Warn("malformed offsets request", "err", err)
			respond(nil)
			return
		}
		out := make([]peer.Offsets, len(refs))
		for i, r := range refs {
			p := b.parts.Get(r.Topic, r.Partition)
			if p == nil || p.State() != partlog.Ready {
				out[i] = peer.Offsets{Code: kafka.ErrorCode(partlog.ErrNotLeader), HW: -1, LogStart: -1, LeaderEpoch: -1}
				continue
			}
			ls, hw := p.Offsets()
			out[i] = peer.Offsets{HW: hw, LogStart: ls, LeaderEpoch: p.LeaderEpoch()}
		}
		respond(peer.AppendOffsets(nil, out))
	case peer.OpFollow, peer.OpFollowTxn:
		b.serveFollow(body, respond)
	case peer.OpMarkers:
		req, err := peer.DecodeMarkersRequest(body)
		if err != nil {
			b.log.Warn("malformed markers request", "err", err)
			respond(nil) // the coordinator takes it as a failure and writes them again
			return
		}
		b.serveMarkers(req, respond)
	case peer.OpVerifyTxn:
		b.serveVerifyTxn(body, respond)
	case peer.OpShareState:
		b.serveShareState(body, respond)
	case peer.OpMoveReady:
		req, err := peer.DecodeMoveReadyRequest(body)
		if err != nil {
			b.log.Warn("malformed move-ready request", "err", err)
			respond(nil)
			return
		}
		b.serveMoveReady(req, respond)
	case peer.OpWake:
		if id, err := peer.DecodeWake(body); err == nil {
			b.polls.wake(id)
		}
		respond([]byte{})
	default:
		b.log.Warn("unknown internal request", "op", body[0])
		respond(nil)
	}
}

// serveLinks takes a proxy's links into the logs of the partitions led here: each is
// read back from the proxy's WAL and checked (partlog.VerifyLink: a link to bytes that
// cannot be read must not be acked), prepared (session fence, sequence and transaction
// checks, offsets: partlog.PrepareLinkData)
// and appended to this broker's WAL as a RecLink, and answered once synced, with the
// lease still valid, like a produce. Every answer says what it proves (peer.LinkClass).
func (b *Broker) serveLinks(req peer.LinkRequest, respond func([]byte)) {
	res := make([]peer.LinkResult, len(req.Links))
	var pending atomic.Int32
	pending.Store(int32(len(req.Links)) + 1)
	finish := func() {
		if pending.Add(-1) == 0 {
			respond(peer.AppendLinkResults(nil, res))
		}
	}
	var src partlog.Reader
	leaseOK := b.leaseOK()
	for i := range req.Links {
		l := req.Links[i]
		p := b.parts.Get(l.Topic, l.Partition)
		if p == nil || !leaseOK {
			res[i] = refusedLink(partlog.ErrNotLeader)
			finish()
			continue
		}
		if l.Transactional() && !b.cfg.Transactions {
			// As this broker's front end answers a transactional produce (the proxy's
			// own configuration let it through).
			res[i] = refusedLink(recbatch.ErrTransactional)
			finish()
			continue
		}
		if src == nil {
			src = b.loader.ProxyReader(req.Proxy, req.ProxyEpoch)
		}
		data, err := partlog.VerifyLink(&l, src)
		if err != nil {
			b.log.Warn("a proxied batch does not read back; its link is refused", "proxy", req.Proxy, "epoch", req.ProxyEpoch, "pos", l.Pos, "err", err)
			// KAFKA_STORAGE_ERROR whatever the read's error (a CRC mismatch here is a stale
			// read of the proxy's WAL, not a corrupt batch of the client's): it retries.
			res[i] = refusedLink(errLinkUnreadable)
			finish()
			continue
		}
		out := &res[i]
		b.appendLink(p, &l, req.Session, src, data, func(r peer.LinkResult) {
			*out = r
			finish()
		})
	}
	finish()
}

var (
	// errLinkFenced refuses a link of a session its proxy fenced (fenceLinks).
	errLinkFenced = fmt.Errorf("%w: the link's session was fenced by its proxy", partlog.ErrNotLeader)
	// errLinkUnreadable refuses a link whose batch does not read back from the proxy's
	// WAL, whatever the read's error (KAFKA_STORAGE_ERROR: the proxy retries).
	errLinkUnreadable = fmt.Errorf("%w: the proxied batch does not read back", partlog.ErrStorage)
	// errLinkNoReason stands for a refusal without an error (UNKNOWN_SERVER_ERROR): an
	// answer with a class other than acked needs a code.
	errLinkNoReason = errors.New("broker: link refused without a reason")
)

// refusedLink is the answer to a link refused before it got offsets.
func refusedLink(err error) peer.LinkResult {
	return peer.LinkResult{Code: linkCode(err), Class: peer.LinkRefused, Base: -1, LogStart: -1}
}

// linkCode is err's Kafka code, never 0 (an answer with a class other than acked needs
// one).
func linkCode(err error) int16 {
	if err == nil {
		err = errLinkNoReason
	}
	return kafka.ErrorCode(err)
}

// appendLink appends a link record for p; done runs once it is durable (or failed) with
// the link's answer: acked; refused before it got offsets (fenced session, sequence,
// leadership, duplicate); or written from the offsets it got but not acked (the sync or
// the fence check failed, or the lease lapsed), which the proxy must treat as maybe in
// the log.
func (b *Broker) appendLink(p *partlog.Partition, l *partlog.Link, session uint64, src partlog.Reader, data []byte, done func(peer.LinkResult)) {
	var res partlog.Prepared
	b.wal.Append(wal.Entry{
		Type:    partlog.RecLink,
		Payload: partlog.AppendLink(make([]byte, 0, partlog.MaxLinkLen), l),
		Prepare: func(pl []byte) error {
			// On the committer, in log order with fenceLinks' barrier: a link after a
			// fence of its session is never prepared.
			if b.proxy.fenced(l.Proxy, l.ProxyEpoch, session) {
				return errLinkFenced
			}
			var err error
			res, err = p.PrepareLinkData(l, src, data) // data: the verified bytes, for the tail cache
			if err == nil && res.Dup != nil {
				return res.Dup
			}
			if err == nil {
				partlog.AppendLink(pl[:0], l) // the offsets it got
			}
			return err
		},
		Done: func(pos wal.Pos, err error) {
			prepared := res.Base()
			b.finishAppend(p, res, pos, err, int64(l.Size), func() { b.cache.Add(p, res) }, func(base, logStart int64, err error) {
				switch {
				case err == nil:
					done(peer.LinkResult{Base: base, LogStart: logStart})
				case prepared >= 0:
					done(peer.LinkResult{Code: linkCode(err), Class: peer.LinkMaybeLogged, Base: prepared, LogStart: -1})
				default:
					done(refusedLink(err))
				}
			})
		},
	})
}
