package hostile

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/sasl"
)

// The pre-authentication attacks of issue 20 (items 2 and 3) on a SASL_PLAINTEXT
// listener, against a real broker process:
//
//   - big: unauthenticated 100 MiB Produce frames whose topic array claims 52 M entries,
//     the whole frame sent (before the fix one took the broker from 39 MB to 3 GB of RSS
//     while kmsg allocated the array);
//   - stall: 210 unauthenticated connections each sending 16 KiB of a 64 KiB frame and
//     nothing more (before the fix they pinned the small requests' pool for the
//     10-minute idle timeout, and a logged-in admin's Metadata timed out).
//
// Meanwhile a logged-in client (SCRAM) must be served, the attackers' connections must
// be closed (the big ones at once, the stalled ones at their frame's read deadline), and
// the broker's peak RSS must stay under preAuthRSSBound. A watchdog kills the broker
// past killRSS, so a regression fails without taking the machine's memory.
const (
	preAuthRSSBound = 256 << 20
	killRSS         = 1 << 30
	bigFrames       = 4
	bigFrameSize    = 100 << 20
	stalledConns    = 210
)

// withUser writes a standalone broker's metadata with a SCRAM-SHA-256 user, as `weir
// admin user set --metadata-file` does, and returns its data dir.
func withUser(t *testing.T, user, password string) string {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	meta, err := metadata.OpenLocal(metadata.LocalConfig{Path: filepath.Join(data, "metadata.json"), Self: metadata.Broker{ID: 0}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := sasl.NewCredential(sasl.ScramSHA256, password, 4096)
	if err != nil {
		t.Fatal(err)
	}
	res, err := meta.AlterScram(context.Background(), []metadata.ScramAlteration{{User: user, Mechanism: metadata.ScramSHA256,
		Credential: metadata.ScramCredential{Mechanism: metadata.ScramSHA256, Iterations: 4096, Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("%v %v", res, err)
	}
	return data
}

// closedByServer reports whether the server closed nc (EOF or reset) within d.
func closedByServer(nc net.Conn, d time.Duration) bool {
	nc.SetReadDeadline(time.Now().Add(d))
	var b [512]byte
	for {
		_, err := nc.Read(b[:])
		if err == nil {
			continue
		}
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
}

func TestPreAuthAttacksOnSASLListener(t *testing.T) {
	data := withUser(t, "admin", "admin-secret")
	p := startBroker(t, "--data-dir", data, "--listen-protocol", "SASL_PLAINTEXT", "--request-read-timeout", "3s", "--log-level", "warn")
	rssBefore, _, _ := p.memory()

	// The watchdog: samples RSS, kills the broker past killRSS.
	var peak atomic.Int64
	var killed atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if rss, _, err := p.memory(); err == nil {
				if rss > peak.Load() {
					peak.Store(rss)
				}
				if rss > killRSS && killed.CompareAndSwap(false, true) {
					p.cmd.Process.Signal(syscall.SIGKILL)
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	adm, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha256Mechanism()),
		kgo.RequestTimeoutOverhead(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ka := kadm.NewClient(adm)
	if _, err := ka.CreateTopic(ctxT(t, 30*time.Second), 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}

	// big: the whole 100 MiB frame, as fast as the broker takes it.
	var bigClosed atomic.Int32
	var bigSent atomic.Int64
	var bwg sync.WaitGroup
	for i := 0; i < bigFrames; i++ {
		bwg.Add(1)
		go func() {
			defer bwg.Done()
			nc, err := net.Dial("tcp", p.addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer nc.Close()
			b := binary.BigEndian.AppendUint32(nil, bigFrameSize)
			b = binary.BigEndian.AppendUint16(b, 0) // Produce
			b = binary.BigEndian.AppendUint16(b, 3)
			b = binary.BigEndian.AppendUint32(b, 1)
			b = binary.BigEndian.AppendUint16(b, 0xffff) // client id
			b = binary.BigEndian.AppendUint16(b, 0xffff) // transactional id
			b = binary.BigEndian.AppendUint16(b, 1)
			b = binary.BigEndian.AppendUint32(b, 30000)
			b = binary.BigEndian.AppendUint32(b, 52000000) // topics claimed
			nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			n, err := nc.Write(b)
			sent := n
			chunk := make([]byte, 1<<20)
			for err == nil && sent < bigFrameSize+4 {
				n, err = nc.Write(chunk[:min(len(chunk), bigFrameSize+4-sent)])
				sent += n
			}
			bigSent.Add(int64(sent))
			if closedByServer(nc, 20*time.Second) {
				bigClosed.Add(1)
			}
		}()
	}

	// stall: 16 KiB of a 64 KiB ApiVersions frame, then nothing.
	var stalled []net.Conn
	for i := 0; i < stalledConns; i++ {
		nc, err := net.Dial("tcp", p.addr)
		if err != nil {
			t.Fatalf("stalled connection %d: %v", i, err)
		}
		defer nc.Close()
		b := binary.BigEndian.AppendUint32(nil, 64<<10)
		b = binary.BigEndian.AppendUint16(b, 18)
		b = binary.BigEndian.AppendUint16(b, 0)
		b = binary.BigEndian.AppendUint32(b, 1)
		b = binary.BigEndian.AppendUint16(b, 0xffff)
		if _, err := nc.Write(append(b, make([]byte, 16<<10)...)); err != nil {
			t.Fatal(err)
		}
		stalled = append(stalled, nc)
	}

	// The logged-in admin is served meanwhile.
	start := time.Now()
	if _, err := ka.Metadata(ctxT(t, 20*time.Second)); err != nil {
		t.Errorf("a logged-in client's Metadata during the attack: %v", err)
	}
	mdTook := time.Since(start)
	if err := adm.ProduceSync(ctxT(t, 20*time.Second), &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr(); err != nil {
		t.Errorf("a logged-in client's produce during the attack: %v", err)
	}
	bwg.Wait()

	// Every stalled connection is closed at its frame deadline (3 s), not the idle
	// timeout (10 minutes).
	open := 0
	for _, nc := range stalled {
		if !closedByServer(nc, 20*time.Second) {
			open++
		}
	}
	if !p.alive() {
		b, _ := os.ReadFile(p.logPath)
		t.Fatalf("the broker died (killed by the watchdog past %d MiB: %v)\n%s", killRSS>>20, killed.Load(), b)
	}
	_, hwm, _ := p.memory()
	peakRSS := max(peak.Load(), hwm)
	m, err := p.scrape()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("broker RSS before %d MiB, peak %d MiB (bound %d MiB); big frames: %d of %d closed, %d MiB sent in all; "+
		"stalled connections left open: %d of %d; logged-in Metadata took %v; bad frames %v, refused before login %v",
		rssBefore>>20, peakRSS>>20, preAuthRSSBound>>20, bigClosed.Load(), bigFrames, bigSent.Load()>>20, open, stalledConns, mdTook,
		sum(m, "weir_broker_bad_frames_total"), sum(m, "weir_broker_sasl_closed_connections_total"))
	if peakRSS > preAuthRSSBound {
		t.Errorf("peak RSS %d MiB over the bound of %d MiB", peakRSS>>20, preAuthRSSBound>>20)
	}
	if bigClosed.Load() != bigFrames {
		t.Errorf("%d of %d unauthenticated 100 MiB frames were not refused", bigFrames-int(bigClosed.Load()), bigFrames)
	}
	if open != 0 {
		t.Errorf("%d stalled unauthenticated connections were left open", open)
	}
}
