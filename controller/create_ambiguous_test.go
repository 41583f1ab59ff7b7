package controller

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// TestCreateTopicAnswerLost: every answer to a create is lost on the way back (the
// controller applied it; the connection then dies), so each retry of the client's call
// fails too, until it gives up. The create worked, with the request's topic ID: the
// client finds it in a consistent read and succeeds, rather than failing a create a
// Kafka client would then retry into TOPIC_ALREADY_EXISTS about its own topic.
func TestCreateTopicAnswerLost(t *testing.T) {
	tc := newTestCluster(t, 1, nil)
	tc.waitLeader()
	tc.broker(1, "a") // a broker to lead the partitions
	target, err := url.Parse("http://" + tc.peers[0].APIAddr)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	var lost atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == ctlwire.PathTopics {
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r) // applied; the answer goes nowhere
			if rec.Code != http.StatusOK {
				t.Errorf("the proxied create: %d %s", rec.Code, rec.Body.String())
			}
			lost.Add(1)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.(*net.TCPConn).SetLinger(0)
				conn.Close()
			}
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	cl := tc.client(-1, func(c *ctlclient.ClientConfig) {
		c.Controllers = []string{proxy.Listener.Addr().String()}
		c.RetryTimeout = time.Second
	})
	defer cl.Close() // before the proxy closes: its watch long-polls through it
	got, err := cl.CreateTopic(ctxT(t), metadata.TopicSpec{Name: "lost", Partitions: 2, ReplicationFactor: -1}, false)
	if err != nil {
		t.Fatalf("create whose answers were all lost (%d of them): %v", lost.Load(), err)
	}
	if lost.Load() == 0 || got.Name != "lost" || len(got.Partitions) != 2 {
		t.Fatalf("created %+v after %d lost answers", got, lost.Load())
	}
	if v := tc.ctrls[0].View().Topics["lost"]; v == nil || v.ID != got.ID {
		t.Fatalf("the controller's topic %+v, the client's %+v", v, got)
	}
}
