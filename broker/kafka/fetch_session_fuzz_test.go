package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzFetchSessionUpdate decodes a Fetch request (its version from the first byte) and
// runs it through the session cache as a full fetch creating a session, then twice as
// an incremental fetch of it (adding, updating, forgetting what it names): nothing may
// panic, and the cache's accounting must hold: every session's partitions listed once
// in order and once by key, the partition count the sum of the sessions'.
func FuzzFetchSessionUpdate(f *testing.F) {
	for _, v := range []int16{7, 12, 13, 16} {
		req := fetchReq(0, 0, []int32{0, 1, 2}, []int32{1, 5})
		req.Version = v
		req.Topics[0].Topic = "t"
		req.ForgottenTopics[0].Topic = "t"
		f.Add(append([]byte{byte(v)}, req.AppendTo(nil)...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1 {
			return
		}
		req := kmsg.NewPtrFetchRequest()
		req.Version = int16(data[0]%10) + 7 // 7..16: the versions with sessions
		if req.ReadFrom(data[1:]) != nil {
			return
		}
		clk := newFakeClock()
		c := newTestSessions(4, clk)
		req.SessionID, req.SessionEpoch = 0, 0
		fc, parts, err := c.begin(req)
		if err != nil {
			t.Fatalf("full fetch refused: %v", err)
		}
		if err := c.finish(&fc, parts, sessAnswer(parts, nil)); err != nil {
			t.Fatalf("full fetch's finish: %v", err)
		}
		for epoch := int32(1); epoch <= 2; epoch++ {
			var id int32
			for sid := range c.byID {
				id = sid
			}
			if id == 0 {
				return // nothing created (no partitions... or all forgotten)
			}
			req.SessionID, req.SessionEpoch = id, epoch
			fc, parts, err := c.begin(req)
			if err != nil {
				t.Fatalf("incremental fetch %d refused: %v", epoch, err)
			}
			if err := c.finish(&fc, parts, sessAnswer(parts, nil)); err != nil {
				t.Fatalf("incremental fetch %d's finish: %v", epoch, err)
			}
			checkSessions(t, c)
		}
	})
}

// checkSessions checks the cache's accounting.
func checkSessions(t *testing.T, c *fetchSessions) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	total := 0
	for id, s := range c.byID {
		s.mu.Lock()
		if s.id != id || s.size != len(s.byKey) || len(s.parts) != len(s.byKey) {
			t.Fatalf("session %d (%d): size %d, %d parts, %d keys", id, s.id, s.size, len(s.parts), len(s.byKey))
		}
		for _, p := range s.parts {
			if s.byKey[p.key] != p || p.gone {
				t.Fatalf("session %d: partition %+v listed but not keyed (or forgotten)", id, p.key)
			}
		}
		total += s.size
		s.mu.Unlock()
	}
	if total != c.partitions || sessionGauge(c.parts) != total || sessionGauge(c.open) != len(c.byID) {
		t.Fatalf("partitions: %d counted, %d summed, gauges %d/%d", c.partitions, total, sessionGauge(c.parts), sessionGauge(c.open))
	}
}
