package kafka

// share_conn.go: a share session ends with the connection that opened it. Kafka's share
// session cache (4.1+) drops a member's session when its connection closes and releases
// the records the member acquired through it (Available again, delivery counts kept),
// so another member gets them at once rather than when their acquisition locks run
// out. The first ShareFetch of a connection starts one watcher of it.

import (
	"context"
	"time"
)

// shareReleaseTimeout bounds the state write of a release on a connection's end.
const shareReleaseTimeout = 10 * time.Second

// shareWatch makes sure the end of c releases the share sessions opened on it.
func (s *Server) shareWatch(c *conn) {
	sh := s.share
	sh.watchMu.Lock()
	if sh.watched == nil {
		sh.watched = map[*conn]struct{}{}
	}
	_, ok := sh.watched[c]
	sh.watched[c] = struct{}{}
	sh.watchMu.Unlock()
	if ok {
		return
	}
	go func() {
		<-c.ctx.Done()
		sh.watchMu.Lock()
		delete(sh.watched, c)
		sh.watchMu.Unlock()
		s.shareConnClosed(c)
	}()
}

// shareConnClosed ends the share sessions of connection c and releases what their
// members hold in their partitions here. Not when the broker is closing: its share
// partitions end with it (a lock does not outlive its leader).
func (s *Server) shareConnClosed(c *conn) {
	if s.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, shareReleaseTimeout)
	defer cancel()
	for _, e := range s.share.Sessions.Drop(c) {
		s.shareRelease(ctx, e.Group, e.Member, e.Parts)
	}
}
