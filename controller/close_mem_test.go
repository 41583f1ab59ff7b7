package controller

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/weir-io/weir/controller/ctlwire"
)

// TestMemQuorumCloseEndsItsGoroutines: Close ends every goroutine a Controller started,
// at once, busy or not: Raft's, the lease, leadership and balancer loops, the API
// server's with metadata long-polls waiting on every controller, and the forwarding
// client's connections (a follower forwarded a request to the leader). In a synctest
// bubble, once every goroutine waits, none of the controllers' may be left: one still
// waiting then would wait for good, or for a timer, after Close returned.
func TestMemQuorumCloseEndsItsGoroutines(t *testing.T) {
	synctest.Test(t, testMemQuorumCloseEndsItsGoroutines)
}

func testMemQuorumCloseEndsItsGoroutines(t *testing.T) {
	mc := newMemCluster(t, 3, func(c *Config) { c.Balance = true })
	leader := mc.waitLeader()
	follower := (leader + 1) % 3
	hc := &http.Client{Transport: &http.Transport{DialContext: mc.net.dial}}
	get := func(i int, path string) (int, error) {
		resp, err := hc.Get("http://" + mc.peers[i].APIAddr + path)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}
	// Forwarded by the follower to the leader, through the follower's client.
	if code, err := get(follower, ctlwire.PathBalancer); err != nil || code != http.StatusOK {
		t.Fatalf("GET %s on a follower: %d %v", ctlwire.PathBalancer, code, err)
	}
	var polls sync.WaitGroup
	for i := range mc.ctrls {
		v := mc.ctrls[i].View().Version
		polls.Go(func() {
			// Answered when the controller closes (503), or cut with its connection.
			_, _ = get(i, fmt.Sprintf("%s?after=%d&wait=1h", ctlwire.PathMetadata, v))
		})
	}
	synctest.Wait() // every long-poll waits in its handler
	mc.stopAll()
	polls.Wait()
	hc.CloseIdleConnections()
	synctest.Wait()
	if left := bubbleGoroutines(); len(left) > 0 {
		t.Fatalf("%d goroutines left after Close:\n\n%s", len(left), strings.Join(left, "\n\n"))
	}
}

// bubbleGoroutines returns the stacks of the goroutines of the caller's synctest bubble
// other than the caller and the bubble's own (synctest.Test's).
func bubbleGoroutines() []string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	stacks := strings.Split(string(buf), "\n\n")
	self := stacks[0] // the caller's, first
	i := strings.Index(self, "synctest bubble ")
	if i < 0 {
		return nil
	}
	tag := self[i:strings.IndexByte(self[i:], ']')+i] + "]"
	var out []string
	for _, s := range stacks[1:] {
		header, _, _ := strings.Cut(s, "\n")
		if !strings.Contains(header, tag) || strings.Contains(s, "testing/synctest.Test") {
			continue
		}
		out = append(out, s)
	}
	return out
}
