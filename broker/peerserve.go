package broker

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/broker/peer"
	"github.com/weir-io/weir/wal"
)

// peerServer answers other brokers' internal requests (broker/peer): links from zone
// proxies, log-end queries, read replicas' follow requests. It runs on the connection's
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
				out[i] = peer.Offsets{Code: kerr.NotLeaderForPartition.Code, HW: -1, LogStart: -1, LeaderEpoch: -1}
				continue
			}
			ls, hw := p.Offsets()
			out[i] = peer.Offsets{HW: hw, LogStart: ls, LeaderEpoch: p.LeaderEpoch()}
		}
		respond(peer.AppendOffsets(nil, out))
	case peer.OpFollow:
		b.serveFollow(body, respond)
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
// prepared (sequence checks, offsets) and appended to this broker's WAL as a RecLink,
// and answered once synced, with the lease still valid, like a produce.
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
			res[i] = peer.LinkResult{Code: kerr.NotLeaderForPartition.Code, Base: -1, LogStart: -1}
			finish()
			continue
		}
		if src == nil {
			src = b.loader.ProxyReader(req.Proxy, req.ProxyEpoch)
		}
		out := &res[i]
		b.appendLink(p, &l, src, func(base, logStart int64, err error) {
			if err != nil {
				*out = peer.LinkResult{Code: kafka.ErrorCode(err), Base: -1, LogStart: -1}
			} else {
				*out = peer.LinkResult{Base: base, LogStart: logStart}
			}
			finish()
		})
	}
	finish()
}

// appendLink appends a link record for p; done runs once it is durable (or failed).
func (b *Broker) appendLink(p *partlog.Partition, l *partlog.Link, src partlog.Reader, done func(base, logStart int64, err error)) {
	var res partlog.Prepared
	b.wal.Append(wal.Entry{
		Type:    partlog.RecLink,
		Payload: partlog.AppendLink(make([]byte, 0, partlog.LinkLen), l),
		Prepare: func(pl []byte) error {
			var err error
			res, err = p.PrepareLink(l, src)
			if err == nil && res.Dup != nil {
				return res.Dup
			}
			if err == nil {
				partlog.AppendLink(pl[:0], l) // the offsets it got
			}
			return err
		},
		Done: func(pos wal.Pos, err error) {
			b.finishAppend(p, res, pos, err, int64(l.Size), nil, done)
		},
	})
}
