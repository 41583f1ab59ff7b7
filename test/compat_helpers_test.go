package test

// Shared pieces of the client-compatibility tests (compat_*_test.go): a broker process
// fronted by a wire-logging TCP proxy, and the bookkeeping of produced records.
//
// The broker advertises the proxy's address, so every connection a client opens (bootstrap
// and the ones it opens after Metadata) goes through the proxy, which writes one line per
// request and per response to wire.log in the broker's directory: API key, version,
// correlation ID, client ID and any non-zero error code in the response. When a test fails
// the tails of wire.log and weir.log are printed, so a failure names the request, the
// version and the broker's answer. The proxy only copies bytes; it never changes them.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// compatBroker is a weir broker process behind a wire-logging proxy.
type compatBroker struct {
	*proc
	bootstrap string // the proxy: what clients dial and what the broker advertises
	wire      *wireProxy
}

// startCompatBroker starts weir with its data (and weir.log, wire.log) in a temp dir.
// The group initial rebalance delay is shortened so that the many group joins of these
// tests do not each wait the default 3 s; it is a delay, not a timeout.
func startCompatBroker(t *testing.T, extra ...string) *compatBroker {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &wireProxy{ln: ln, seen: map[string]map[int16]int{}, produceAcks: map[int16]int{}, errs: map[string]int{}}
	wf, err := os.Create(filepath.Join(dir, "wire.log"))
	if err != nil {
		t.Fatal(err)
	}
	w.out = wf
	args := append([]string{"--advertise", ln.Addr().String(), "--group-initial-rebalance-delay", "300ms"}, extra...)
	p := startWeir(t, dir, "", args...)
	w.target = p.addr
	go w.serve()
	b := &compatBroker{proc: p, bootstrap: ln.Addr().String(), wire: w}
	// Registered after startWeir's cleanup, so it runs first: while the broker still runs.
	t.Cleanup(func() {
		ln.Close()
		w.closeAll()
		t.Logf("error responses on the wire: %s", w.errorSummary())
		if warn := grepTail(filepath.Join(dir, "weir.log"), 40, false, "level=WARN", "level=ERROR", "panic"); warn != "" {
			t.Logf("weir.log warnings and errors:\n%s", warn)
		}
		if t.Failed() {
			t.Logf("API versions on the wire: %s", w.summary())
			t.Logf("wire.log, error responses and broker closes (first 40):\n%s", grepTail(filepath.Join(dir, "wire.log"), 40, false, "err=", "closed by broker", "undecodable"))
			t.Logf("wire.log, last 60 lines:\n%s", grepTail(filepath.Join(dir, "wire.log"), 60, true))
			t.Logf("weir.log, last 60 lines:\n%s", grepTail(filepath.Join(dir, "weir.log"), 60, true))
		}
		wf.Close()
	})
	return b
}

// grepTail returns the lines of a file containing any of pats (all lines if none), the
// first n of them, or the last n if tail.
func grepTail(path string, n int, tail bool, pats ...string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var keep []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if len(pats) == 0 {
			keep = append(keep, l)
			continue
		}
		for _, p := range pats {
			if strings.Contains(l, p) {
				keep = append(keep, l)
				break
			}
		}
	}
	if len(keep) > n {
		if tail {
			keep = keep[len(keep)-n:]
		} else {
			keep = keep[:n]
		}
	}
	return strings.Join(keep, "\n")
}

type wireProxy struct {
	ln     net.Listener
	target string
	connID atomic.Int64

	mu   sync.Mutex
	out  io.Writer
	seen map[string]map[int16]int // API name -> version -> requests
	// produce requests per acks value; partition batches with a producer ID
	produceAcks       map[int16]int
	idempotentBatches int
	errs              map[string]int // distinct error responses -> count
	conns             []net.Conn
	done              bool
}

func (w *wireProxy) logf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fmt.Fprintf(w.out, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
}

func (w *wireProxy) track(c net.Conn) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return false
	}
	w.conns = append(w.conns, c)
	return true
}

func (w *wireProxy) closeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	for _, c := range w.conns {
		c.Close()
	}
}

// summary lists every API key and version clients sent, e.g. "Fetch v11 ×12".
func (w *wireProxy) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var parts []string
	for name, vs := range w.seen {
		var vv []int
		for v := range vs {
			vv = append(vv, int(v))
		}
		sort.Ints(vv)
		for _, v := range vv {
			parts = append(parts, fmt.Sprintf("%s v%d ×%d", name, v, vs[int16(v)]))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func (w *wireProxy) serve() {
	for {
		c, err := w.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", w.target)
		if err != nil {
			w.logf("dial broker: %v", err)
			c.Close()
			continue
		}
		if !w.track(c) || !w.track(s) {
			c.Close()
			s.Close()
			return
		}
		go w.pipe(w.connID.Add(1), c, s)
	}
}

type inflight struct {
	key, version int16
	flexible     bool
}

// pipe copies frames both ways, decoding headers (and responses) for the log.
func (w *wireProxy) pipe(id int64, client, broker net.Conn) {
	var mu sync.Mutex
	pending := map[int32]inflight{}
	w.logf("c%d open from %s", id, client.RemoteAddr())
	var clientGone atomic.Bool // the client closed first: the broker side closing is expected
	done := make(chan struct{})
	go func() { // broker -> client
		defer close(done)
		defer client.Close()
		r := bufio.NewReader(broker)
		for {
			frame, err := readFrame(r)
			if err != nil {
				if !clientGone.Load() {
					mu.Lock()
					var open []string
					for corr, inf := range pending {
						open = append(open, fmt.Sprintf("%s v%d corr=%d", kmsg.NameForKey(inf.key), inf.version, corr))
					}
					mu.Unlock()
					sort.Strings(open)
					w.logf("c%d closed by broker: %v; unanswered requests: %v", id, err, open)
				}
				return
			}
			if len(frame) >= 4 {
				corr := int32(binary.BigEndian.Uint32(frame))
				mu.Lock()
				inf, ok := pending[corr]
				delete(pending, corr)
				mu.Unlock()
				if ok {
					desc := describeResponse(inf, frame[4:])
					if desc != "" {
						w.noteError(fmt.Sprintf("%s v%d:%s", kmsg.NameForKey(inf.key), inf.version, stripIndexes(desc)))
					}
					w.logf("c%d <- %s v%d corr=%d %dB%s", id, kmsg.NameForKey(inf.key), inf.version, corr, len(frame), desc)
				} else {
					w.logf("c%d <- unknown corr=%d %dB", id, corr, len(frame))
				}
			}
			if err := writeFrame(client, frame); err != nil {
				return
			}
		}
	}()
	r := bufio.NewReader(client)
	for {
		frame, err := readFrame(r)
		if err != nil {
			clientGone.Store(true)
			if err != io.EOF {
				w.logf("c%d closed by client: %v", id, err)
			} else {
				w.logf("c%d closed by client", id)
			}
			break
		}
		if len(frame) >= 8 {
			key := int16(binary.BigEndian.Uint16(frame))
			ver := int16(binary.BigEndian.Uint16(frame[2:]))
			corr := int32(binary.BigEndian.Uint32(frame[4:]))
			clientID := ""
			if len(frame) >= 10 {
				if n := int16(binary.BigEndian.Uint16(frame[8:])); n > 0 && len(frame) >= 10+int(n) {
					clientID = string(frame[10 : 10+int(n)])
				}
			}
			inf := inflight{key: key, version: ver}
			if req := kmsg.RequestForKey(key); req != nil {
				req.SetVersion(ver)
				inf.flexible = req.IsFlexible()
			}
			mu.Lock()
			pending[corr] = inf
			mu.Unlock()
			name := kmsg.NameForKey(key)
			w.mu.Lock()
			if w.seen[name] == nil {
				w.seen[name] = map[int16]int{}
			}
			w.seen[name][ver]++
			w.mu.Unlock()
			extra := ""
			if key == int16(kmsg.Produce) && len(frame) >= 16 {
				extra = w.noteProduce(frame, inf)
			}
			w.logf("c%d -> %s(key %d) v%d corr=%d client=%q %dB%s", id, name, key, ver, corr, clientID, len(frame), extra)
		}
		if err := writeFrame(broker, frame); err != nil {
			break
		}
	}
	clientGone.Store(true)
	broker.Close()
	<-done
}

// noteProduce decodes a produce request: its acks, and whether its batches carry a
// producer ID (idempotent). Both are counted, for tests to assert on, and logged.
func (w *wireProxy) noteProduce(frame []byte, inf inflight) string {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(inf.version)
	body, ok := skipRequestHeader(frame, inf.flexible)
	if !ok || req.ReadFrom(body) != nil {
		return " (undecodable body)"
	}
	n, idem := 0, 0
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			n++
			// record batch v2: producerId is the int64 at byte 43
			if len(p.Records) >= 51 && int64(binary.BigEndian.Uint64(p.Records[43:])) >= 0 {
				idem++
			}
		}
	}
	w.mu.Lock()
	w.produceAcks[req.Acks]++
	w.idempotentBatches += idem
	w.mu.Unlock()
	txn := ""
	if req.TransactionID != nil {
		txn = " txn=" + *req.TransactionID
	}
	return fmt.Sprintf(" acks=%d partitions=%d idempotent=%d%s", req.Acks, n, idem, txn)
}

// produceStats returns the produce requests seen per acks value and the number of
// partition batches that carried a producer ID.
func (w *wireProxy) produceStats() (map[int16]int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	acks := map[int16]int{}
	for k, v := range w.produceAcks {
		acks[k] = v
	}
	return acks, w.idempotentBatches
}

// checkAllAcks fails t unless every produce request so far asked for acks=all (-1).
func (w *wireProxy) checkAllAcks(t *testing.T) {
	t.Helper()
	acks, _ := w.produceStats()
	for a, n := range acks {
		if a != -1 {
			t.Errorf("%d produce requests with acks=%d, want only acks=all (-1)", n, a)
		}
	}
	if acks[-1] == 0 {
		t.Errorf("no produce request with acks=all seen on the wire")
	}
}

func (w *wireProxy) noteError(s string) {
	w.mu.Lock()
	w.errs[s]++
	w.mu.Unlock()
}

// errorSummary lists the distinct error responses (and undecodable ones) with counts.
func (w *wireProxy) errorSummary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var parts []string
	for e, n := range w.errs {
		parts = append(parts, fmt.Sprintf("%s ×%d", e, n))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// stripIndexes turns "Topics[0].Partitions[2].ErrorCode" into "Topics[].Partitions[].ErrorCode"
// so that error summaries group by field.
func stripIndexes(s string) string {
	var b strings.Builder
	skip := false
	for _, r := range s {
		switch {
		case r == '[':
			skip = true
			b.WriteRune(r)
		case r == ']':
			skip = false
			b.WriteRune(r)
		case !skip:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// resetSeen clears the per-API version counts behind summary.
func (w *wireProxy) resetSeen() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = map[string]map[int16]int{}
}

func skipRequestHeader(frame []byte, flexible bool) ([]byte, bool) {
	if len(frame) < 10 {
		return nil, false
	}
	b := frame[8:]
	n := int(int16(binary.BigEndian.Uint16(b)))
	b = b[2:]
	if n > 0 {
		if len(b) < n {
			return nil, false
		}
		b = b[n:]
	}
	if flexible { // request header v2: tagged fields
		rest, ok := skipTags(b)
		if !ok {
			return nil, false
		}
		b = rest
	}
	return b, true
}

// describeResponse decodes a response body and lists its non-zero error codes.
func describeResponse(inf inflight, body []byte) string {
	resp := kmsg.ResponseForKey(inf.key)
	if resp == nil {
		return " (unknown key)"
	}
	resp.SetVersion(inf.version)
	// Response header v1 (flexible versions, except ApiVersions) carries tagged fields.
	if inf.flexible && inf.key != int16(kmsg.ApiVersions) {
		rest, ok := skipTags(body)
		if !ok {
			return " (undecodable header)"
		}
		body = rest
	}
	if err := resp.ReadFrom(body); err != nil {
		if inf.key == int16(kmsg.ApiVersions) { // answered as v0 when the version is too new
			v0 := kmsg.NewPtrApiVersionsResponse()
			if v0.ReadFrom(body) == nil && v0.ErrorCode != 0 {
				return " err=" + errName(v0.ErrorCode) + " (answered as v0)"
			}
		}
		return fmt.Sprintf(" (undecodable: %v)", err)
	}
	var errs []string
	collectErrors(reflect.ValueOf(resp), "", &errs)
	if len(errs) == 0 {
		return ""
	}
	if len(errs) > 8 {
		errs = append(errs[:8], fmt.Sprintf("… %d more", len(errs)-8))
	}
	return " err=" + strings.Join(errs, " ")
}

func errName(code int16) string {
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return fmt.Sprintf("%s(%d)", ke.Message, code)
	}
	return fmt.Sprint(code)
}

func collectErrors(v reflect.Value, path string, out *[]string) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			collectErrors(v.Elem(), path, out)
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < v.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			fv := v.Field(i)
			if f.Name == "ErrorCode" && fv.Kind() == reflect.Int16 {
				if c := int16(fv.Int()); c != 0 {
					*out = append(*out, strings.TrimPrefix(path+".ErrorCode", ".")+"="+errName(c))
				}
				continue
			}
			collectErrors(fv, path+"."+f.Name, out)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := 0; i < v.Len(); i++ {
			collectErrors(v.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}

// skipTags skips a tagged-field section (uvarint count, then uvarint tag, uvarint size
// and size bytes per field).
func skipTags(b []byte) ([]byte, bool) {
	n, m := binary.Uvarint(b)
	if m <= 0 {
		return nil, false
	}
	b = b[m:]
	for i := uint64(0); i < n; i++ {
		if _, m = binary.Uvarint(b); m <= 0 {
			return nil, false
		}
		b = b[m:]
		size, m := binary.Uvarint(b)
		if m <= 0 || uint64(len(b)-m) < size {
			return nil, false
		}
		b = b[m+int(size):]
	}
	return b, true
}

func readFrame(r *bufio.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 256<<20 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

func writeFrame(w io.Writer, frame []byte) error {
	buf := make([]byte, 4+len(frame))
	binary.BigEndian.PutUint32(buf, uint32(len(frame)))
	copy(buf[4:], frame)
	_, err := w.Write(buf)
	return err
}

// produced tracks records acked by a producer: what each (partition, offset) must hold.
type produced struct {
	mu   sync.Mutex
	recs map[int32]map[int64]string // partition -> offset -> value
}

func newProduced() *produced { return &produced{recs: map[int32]map[int64]string{}} }

// ack records that value was acked at partition/offset; a second ack of the same offset
// is an error (two records given one offset).
func (p *produced) ack(partition int32, offset int64, value string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.recs[partition]
	if m == nil {
		m = map[int64]string{}
		p.recs[partition] = m
	}
	if old, dup := m[offset]; dup {
		return fmt.Errorf("partition %d offset %d acked twice: %q and %q", partition, offset, old, value)
	}
	m[offset] = value
	return nil
}

func (p *produced) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, m := range p.recs {
		n += len(m)
	}
	return n
}

// dense checks that each partition's acked offsets are exactly 0..n-1 and returns the
// values in offset order.
func (p *produced) dense(t *testing.T) map[int32][]string {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[int32][]string{}
	for part, m := range p.recs {
		vals := make([]string, len(m))
		for off, v := range m {
			if off < 0 || off >= int64(len(m)) {
				t.Fatalf("partition %d: acked offsets are not dense from 0: offset %d among %d records", part, off, len(m))
			}
			vals[off] = v
		}
		out[part] = vals
	}
	return out
}
