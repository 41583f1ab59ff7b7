package partlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"testing"

	"github.com/weir-io/weir/internal/kafkatest"
	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/waltest"
)

func testLink(t *testing.T, batch []byte, pos wal.Pos) Link {
	t.Helper()
	h, err := recbatch.ValidateProduceWith(batch, recbatch.ProduceRules{Transactional: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := LinkOf(metadata.TopicID{9}, 2, 5, 3, pos, &h, batch)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLinkEncoding(t *testing.T) {
	l := testLink(t, kafkatest.Batch(77, 1, 10, []byte("a"), []byte("b")), 1234)
	l.Base, l.LeaderEpoch = 500, 4
	b := AppendLink(nil, &l)
	if len(b) != LinkLenV1 || b[0] != 1 {
		t.Fatalf("a non-transactional link encoded in %d bytes, version %d: want v1, %d", len(b), b[0], LinkLenV1)
	}
	got, n, err := DecodeLink(b)
	if err != nil || got != l || n != LinkLenV1 {
		t.Fatalf("round trip: %+v %d %v, want %+v", got, n, err, l)
	}
	if l.Last() != 501 || l.ProducerID != 77 || l.BaseSequence != 10 || l.LastOffsetDelta != 1 || l.Transactional() {
		t.Fatalf("link fields from the batch: %+v", l)
	}
	for _, bad := range [][]byte{b[:LinkLenV1-1], append([]byte{9}, b[1:]...), nil} {
		if _, _, err := DecodeLink(bad); err == nil {
			t.Fatal("a short or unknown-version link decoded")
		}
	}
	neg := AppendLink(nil, &Link{Size: 10})
	if _, _, err := DecodeLink(neg); err == nil {
		t.Fatal("a link of a 10-byte batch decoded")
	}

	// A transactional batch's link is v2 and carries the attribute (only that one: the
	// compression codec stays in the batch bytes).
	tb := kafkatest.TxnBatch(78, 0, 0, []byte("t"))
	tb[22] |= 0x01 // gzip in the attributes' low byte (the records are not decoded here)
	binary.BigEndian.PutUint32(tb[17:], crc32.Checksum(tb[21:], crc32.MakeTable(crc32.Castagnoli)))
	tl := testLink(t, tb, 99)
	if tl.Attributes != recbatch.AttrTransactional || !tl.Transactional() {
		t.Fatalf("attributes of a transactional batch's link: %#x", tl.Attributes)
	}
	tenc := AppendLink(nil, &tl)
	if len(tenc) != LinkLenV2 || tenc[0] != 2 {
		t.Fatalf("a transactional link encoded in %d bytes, version %d: want v2, %d", len(tenc), tenc[0], LinkLenV2)
	}
	if got, n, err := DecodeLink(append(tenc, b...)); err != nil || got != tl || n != LinkLenV2 {
		t.Fatalf("v2 round trip: %+v %d %v, want %+v", got, n, err, tl)
	}
	if _, _, err := DecodeLink(tenc[:LinkLenV2-1]); err == nil {
		t.Fatal("a cut v2 link decoded")
	}
	// What LinkOf never gives does not decode: a v2 link without attributes (one
	// encoding per link), a control bit, a transaction without a producer.
	for name, mut := range map[string]func(l *Link){
		"v2 without attributes": func(l *Link) { l.Attributes = 0 },
		"control":               func(l *Link) { l.Attributes |= recbatch.AttrControl },
		"no producer":           func(l *Link) { l.ProducerID = -1 },
	} {
		bad := tl
		mut(&bad)
		enc := AppendLink(nil, &bad)
		if bad.Attributes == 0 {
			enc = append(tenc[:1:1], enc[1:]...)
			enc = binary.BigEndian.AppendUint16(enc, 0)
		}
		if _, _, err := DecodeLink(enc); err == nil {
			t.Fatalf("%s: decoded", name)
		}
	}
	// A control batch is never linked.
	m := recbatch.EncodeMarker(recbatch.Marker{ProducerID: 78, Commit: true}, 1)
	mh, err := recbatch.Parse(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LinkOf(metadata.TopicID{9}, 2, 5, 3, 0, &mh, m); !errors.Is(err, ErrControlLink) {
		t.Fatalf("LinkOf of a marker: %v", err)
	}
}

// staleReader returns zeros for the first reads, as a shared file system's client may for
// a page it cached before the owner wrote it, until revalidated.
type staleReader struct {
	inner       Reader
	stale       int
	revalidated int
}

func (s *staleReader) ReadAt(p []byte, pos wal.Pos) error {
	if s.stale > 0 {
		clear(p)
		return nil
	}
	return s.inner.ReadAt(p, pos)
}

func (s *staleReader) Revalidate(wal.Pos) error {
	s.revalidated++
	s.stale--
	return nil
}

// A linked batch reads back with the offset and epoch its link assigned (the CRC still
// valid: it does not cover them); a read that does not match the link's CRC is retried
// after revalidating, and given up with ErrStaleRead.
func TestLinkReaderPatchesAndRevalidates(t *testing.T) {
	batch := kafkatest.Batch(-1, -1, -1, []byte("x"), []byte("y"))
	log := &memLog{}
	pos := log.add(append([]byte(nil), batch...))
	l := testLink(t, batch, pos)
	l.Base, l.LeaderEpoch = 1000, 6
	sr := &staleReader{inner: log, stale: 2}
	r := &linkReader{in: sr, base: l.Base, epoch: l.LeaderEpoch, crc: l.CRC, lastDelta: l.LastOffsetDelta}
	buf := make([]byte, len(batch))
	if err := r.ReadAt(buf, pos); err != nil {
		t.Fatal(err)
	}
	if sr.revalidated != 2 {
		t.Fatalf("revalidated %d times, want 2", sr.revalidated)
	}
	h, _ := recbatch.Parse(buf)
	if h.BaseOffset != 1000 || h.LeaderEpoch != 6 || !recbatch.CRCOK(buf) {
		t.Fatalf("read back base %d epoch %d crc ok %v", h.BaseOffset, h.LeaderEpoch, recbatch.CRCOK(buf))
	}
	if !bytes.Equal(buf[17:], batch[17:]) {
		t.Fatal("the records changed")
	}
	r = &linkReader{in: &staleReader{inner: log, stale: 100}, base: 1, epoch: 1, crc: l.CRC, lastDelta: l.LastOffsetDelta}
	if err := r.ReadAt(buf, pos); !errors.Is(err, ErrStaleRead) {
		t.Fatalf("a read that never matches: %v, want ErrStaleRead", err)
	}
}

// headerStaleReader serves, until revalidated, the batch with the bytes the CRC does not
// cover (base offset, batch length, leader epoch, magic) zeroed, as a stale page that
// ends inside the batch header would: the CRC'd part is right.
type headerStaleReader struct {
	inner       Reader
	stale       int
	revalidated int
}

func (s *headerStaleReader) ReadAt(p []byte, pos wal.Pos) error {
	if err := s.inner.ReadAt(p, pos); err != nil {
		return err
	}
	if s.stale > 0 {
		clear(p[:17])
	}
	return nil
}

func (s *headerStaleReader) Revalidate(wal.Pos) error {
	s.revalidated++
	s.stale--
	return nil
}

// A stale page across the header boundary (length and magic zero, CRC field and records
// right) is never served: the read is revalidated until the whole batch checks, or fails.
func TestLinkReaderChecksUncoveredHeaderBytes(t *testing.T) {
	batch := kafkatest.Batch(-1, -1, -1, []byte("x"), []byte("y"))
	log := &memLog{}
	pos := log.add(append([]byte(nil), batch...))
	l := testLink(t, batch, pos)
	l.Base, l.LeaderEpoch = 7, 1
	sr := &headerStaleReader{inner: log, stale: 1}
	r := &linkReader{in: sr, base: l.Base, epoch: l.LeaderEpoch, crc: l.CRC, lastDelta: l.LastOffsetDelta}
	buf := make([]byte, len(batch))
	if err := r.ReadAt(buf, pos); err != nil {
		t.Fatal(err)
	}
	if sr.revalidated != 1 {
		t.Fatalf("a zero batch length and magic were served (revalidated %d times)", sr.revalidated)
	}
	if h, err := recbatch.Frame(buf); err != nil || h.Size() != len(batch) {
		t.Fatalf("read back %+v %v", h, err)
	}
	r = &linkReader{in: &headerStaleReader{inner: log, stale: 100}, base: 1, epoch: 1, crc: l.CRC, lastDelta: l.LastOffsetDelta}
	if err := r.ReadAt(buf, pos); !errors.Is(err, ErrStaleRead) {
		t.Fatalf("a header that never checks: %v, want ErrStaleRead", err)
	}
	// A link whose last offset delta disagrees with the batch is refused (VerifyLink).
	bad := l
	bad.LastOffsetDelta++
	if _, err := VerifyLink(&bad, &headerStaleReader{inner: log}); !errors.Is(err, ErrStaleRead) {
		t.Fatalf("a link not matching its batch verified: %v", err)
	}
	if got, err := VerifyLink(&l, &headerStaleReader{inner: log}); err != nil || !bytes.Equal(got[17:], batch[17:]) {
		t.Fatalf("verify: %v", err)
	}
}

// A proxy's WAL reader that failed to open is asked again at the next read, never kept:
// a directory not visible yet must not fail the batches it holds for good.
func TestProxyReaderReopensAfterFailure(t *testing.T) {
	fs := waltest.NewMemFS()
	cfg := wal.DefaultConfig("/wal/broker-5/epoch-3")
	cfg.FS, cfg.SegmentSize = fs, 1<<20
	w, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Replay(nil); err != nil {
		t.Fatal(err)
	}
	batch := kafkatest.Batch(-1, -1, -1, []byte("x"))
	pos := appendRec(t, w, RecProxyBatch, EncodeBatchRec(metadata.TopicID{9}, 2, batch)) + BatchRecHdr
	visible := false // the directory is not listed yet (a lagging directory cache)
	ld := NewLoader(fs, func(b int32) ([]Source, error) {
		if !visible {
			return nil, nil
		}
		return []Source{{Broker: 5, Epoch: 3, Dir: "/wal/broker-5/epoch-3"}}, nil
	}, nil)
	defer ld.Close()
	r := ld.ProxyReader(5, 3)
	buf := make([]byte, len(batch))
	if err := r.ReadAt(buf, pos); !errors.Is(err, ErrStorage) {
		t.Fatalf("first read: %v, want ErrStorage", err)
	}
	visible = true
	if err := r.ReadAt(buf, pos); err != nil || !bytes.Equal(buf, batch) {
		t.Fatalf("second read: %v", err)
	}
}

// appendRec appends one record to w and waits for its position.
func appendRec(t *testing.T, w *wal.WAL, typ byte, payload []byte) wal.Pos {
	t.Helper()
	type res struct {
		pos wal.Pos
		err error
	}
	ch := make(chan res, 1)
	w.Append(wal.Entry{Type: typ, Payload: payload, Done: func(pos wal.Pos, err error) { ch <- res{pos, err} }})
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.pos
}

// The path of a proxied batch through WALs on a shared file system seen by two hosts: the
// proxy writes two batches (the second never linked: it crashed before sending the link),
// the leader links the first. A load of the partition from the leader's WAL reads the
// linked batch from the proxy's WAL, through a view opened before the proxy wrote it
// (stale pages: the link's CRC makes the reader revalidate), with the link's offsets; the
// unlinked batch is in nobody's log. Once both directories are sealed, their INDEX files
// say what they hold: the leader's the partition's last offset, the proxy's that it
// proxied the partition.
func TestLoadLinkedBatchFromProxyWAL(t *testing.T) {
	server := waltest.NewMemFS()
	proxyHost, leaderHost := waltest.NewStaleFS(server), waltest.NewStaleFS(server)
	open := func(fs wal.FS, dir string) *wal.WAL {
		cfg := wal.DefaultConfig(dir)
		cfg.FS, cfg.SegmentSize = fs, 1<<20
		w, err := wal.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Replay(nil); err != nil {
			t.Fatal(err)
		}
		return w
	}
	pw := open(proxyHost, "/wal/broker-5/epoch-3")
	id := metadata.TopicID{9}
	appendRec(t, pw, RecProxyBatch, EncodeBatchRec(id, 2, kafkatest.Batch(-1, -1, -1, []byte("first"))))
	dirs := func(b int32) ([]Source, error) {
		switch b {
		case 5:
			return []Source{{Broker: 5, Epoch: 3, Dir: "/wal/broker-5/epoch-3"}}, nil
		case 6:
			return []Source{{Broker: 6, Epoch: 1, Dir: "/wal/broker-6/epoch-1"}}, nil
		}
		return nil, nil
	}
	ld := NewLoader(leaderHost, dirs, nil)
	defer ld.Close()
	if _, err := ld.View("/wal/broker-5/epoch-3"); err != nil { // caches the first page
		t.Fatal(err)
	}
	ro, err := ld.View("/wal/broker-5/epoch-3")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Scan(func(byte, []byte, wal.Pos) error { return nil }); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	_ = ld.ProxyReader(5, 3).ReadAt(buf, wal.HeaderSize+wal.RecordHeaderSize) // the page is now cached
	linked := kafkatest.Batch(-1, -1, -1, []byte("second"), []byte("third"))
	pos := appendRec(t, pw, RecProxyBatch, EncodeBatchRec(id, 2, linked))
	appendRec(t, pw, RecProxyBatch, EncodeBatchRec(id, 2, kafkatest.Batch(-1, -1, -1, []byte("never linked"))))

	lk := testLink(t, linked, pos+BatchRecHdr)
	lk.Proxy, lk.ProxyEpoch, lk.Base, lk.LeaderEpoch = 5, 3, 0, 2
	lw := open(leaderHost, "/wal/broker-6/epoch-1")
	appendRec(t, lw, RecLink, AppendLink(nil, &lk))
	lw.Close()
	pw.Close()

	p := New("t", id, 2, 2, 0)
	ranges := map[*Partition][]LogRange{p: {{Broker: 6, Start: 0, End: -1}}}
	if _, err := ld.Load([]*Partition{p}, ranges, LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.FinishLoad(-1, false, true); err != nil {
		t.Fatal(err)
	}
	if _, hw := p.Offsets(); hw != 2 {
		t.Fatalf("high watermark %d, want 2 (only the linked batch)", hw)
	}
	pieces, _, _, err := p.Read(0, 1<<20, true, -1)
	if err != nil || len(pieces) != 1 {
		t.Fatalf("read: %d pieces, %v", len(pieces), err)
	}
	got := make([]byte, pieces[0].Size)
	if err := pieces[0].Src.ReadAt(got, pieces[0].Pos); err != nil {
		t.Fatal(err)
	}
	h, _ := recbatch.Parse(got)
	if h.BaseOffset != 0 || h.LeaderEpoch != 2 || !bytes.Equal(got[17:], linked[17:]) {
		t.Fatalf("linked batch read back at base %d epoch %d", h.BaseOffset, h.LeaderEpoch)
	}

	for _, dir := range []string{"/wal/broker-5/epoch-3", "/wal/broker-6/epoch-1"} {
		if _, err := wal.Seal(server, dir, "test"); err != nil {
			t.Fatal(err)
		}
	}
	ld2 := NewLoader(server, dirs, nil)
	defer ld2.Close()
	for _, b := range []int32{5, 6} {
		srcs, _ := dirs(b)
		if err := ld2.IndexDir(srcs[0]); err != nil {
			t.Fatal(err)
		}
	}
	pi, ok, err := ReadDirIndex(server, "/wal/broker-5/epoch-3")
	if err != nil || !ok || len(pi.Partitions) != 0 || len(pi.Proxied) != 1 || pi.Proxied[0] != (DirIndexProxied{Topic: id, Partition: 2}) {
		t.Fatalf("proxy's INDEX: %+v %v %v", pi, ok, err)
	}
	li, ok, err := ReadDirIndex(server, "/wal/broker-6/epoch-1")
	if err != nil || !ok || len(li.Partitions) != 1 || li.Partitions[0].LastOffset != 1 || len(li.Proxied) != 0 {
		t.Fatalf("leader's INDEX: %+v %v %v", li, ok, err)
	}
}

// PrepareLink checks sequences like Prepare: a retry gets its original offset, a gap is
// refused, and a rolled-back link leaves no trace.
func TestPrepareLinkSequences(t *testing.T) {
	p, log := ready(t), &memLog{}
	link := func(seq int32, n int) *Link {
		vals := make([][]byte, n)
		for i := range vals {
			vals[i] = []byte{byte(i)}
		}
		b := kafkatest.Batch(50, 0, seq, vals...)
		l := testLink(t, b, log.add(b))
		return &l
	}
	l0 := link(0, 3)
	pr, err := p.PrepareLink(l0, log)
	if err != nil || pr.Dup != nil || l0.Base != 0 || l0.LeaderEpoch != 3 || !pr.Linked() {
		t.Fatalf("first link: %+v %v %+v", pr, err, l0)
	}
	p.Commit(pr, log, 0)
	if pr, err := p.PrepareLink(link(0, 3), log); err != nil || pr.Dup == nil || pr.Dup.Offset != 0 {
		t.Fatalf("retry: %+v %v", pr, err)
	}
	if _, err := p.PrepareLink(link(7, 1), log); !errors.Is(err, ErrOutOfOrderSeq) {
		t.Fatalf("gap: %v", err)
	}
	l3 := link(3, 2)
	pr, err = p.PrepareLink(l3, log)
	if err != nil || l3.Base != 3 {
		t.Fatalf("next: %v base %d", err, l3.Base)
	}
	p.Rollback(l3.Base)
	if _, hw := p.Offsets(); hw != 3 || p.End() != 3 {
		t.Fatalf("after rollback: hw %d end %d", hw, p.End())
	}
	if pr, err := p.PrepareLink(link(3, 2), log); err != nil || pr.Dup != nil || pr.Base() != 3 {
		t.Fatalf("after rollback the same sequence is new again: %+v %v", pr, err)
	}
}

// A batch loaded from a directory this process does not write (a fenced broker's) is
// read through the checked reader: bytes the CRC does not cover that come back wrong (a
// zero batch length and magic, as from a stale page ending inside the header) are not
// served.
func TestLoadedBatchOfOtherWALChecked(t *testing.T) {
	server := waltest.NewMemFS()
	host := waltest.NewStaleFS(server)
	dir := "/wal/broker-6/epoch-1"
	cfg := wal.DefaultConfig(dir)
	cfg.FS, cfg.SegmentSize = server, 1<<20
	w, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Replay(nil); err != nil {
		t.Fatal(err)
	}
	id := metadata.TopicID{9}
	batch := kafkatest.Batch(-1, -1, -1, []byte("direct"))
	recbatch.SetOffsetEpoch(batch, 0, 2)
	appendRec(t, w, RecBatch, EncodeBatchRec(id, 2, batch))
	w.Close()

	ld := NewLoader(host, func(b int32) ([]Source, error) {
		return []Source{{Broker: 6, Epoch: 1, Dir: dir}}, nil
	}, nil)
	defer ld.Close()
	p := New("t", id, 2, 2, 0)
	if _, err := ld.Load([]*Partition{p}, map[*Partition][]LogRange{p: {{Broker: 6, Start: 0, End: -1}}}, LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.FinishLoad(-1, false, true); err != nil {
		t.Fatal(err)
	}
	pieces, _, _, err := p.Read(0, 1<<20, true, -1)
	if err != nil || len(pieces) != 1 {
		t.Fatalf("read: %d pieces, %v", len(pieces), err)
	}
	got := make([]byte, pieces[0].Size)
	if err := pieces[0].Src.ReadAt(got, pieces[0].Pos); err != nil || !bytes.Equal(got, batch) {
		t.Fatalf("read back: %v", err)
	}

	// The file now serves the header's first 17 bytes as zeros.
	entries, err := server.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	zeroed := false
	for _, e := range entries {
		f, err := server.OpenFile(dir+"/"+e.Name(), os.O_RDWR, 0)
		if err != nil {
			continue
		}
		st, _ := f.Stat()
		data := make([]byte, st.Size())
		f.ReadAt(data, 0)
		if i := bytes.Index(data, batch[17:]); i >= 17 {
			f.WriteAt(make([]byte, 17), int64(i-17))
			zeroed = true
		}
		f.Close()
	}
	if !zeroed {
		t.Fatal("batch not found in the WAL files")
	}
	host.DropCaches()
	if err := pieces[0].Src.ReadAt(got, pieces[0].Pos); !errors.Is(err, ErrStaleRead) {
		t.Fatalf("a batch with a zero length and magic: %v, want ErrStaleRead (never served)", err)
	}
}

// The stale page of the issue, on waltest.StaleFS: the reader's host cached the page
// holding the first 17 bytes of a batch header before the proxy wrote the batch, and the
// rest of the batch (CRC field and records) is on the next page, read fresh. The CRC
// matches the link, yet the batch length and magic read as zero: the read is revalidated
// and served whole, never as a zero-length batch.
func TestStalePageAcrossHeaderNotServed(t *testing.T) {
	server := waltest.NewMemFS()
	proxyHost, readerHost := waltest.NewStaleFS(server), waltest.NewStaleFS(server)
	dir := "/wal/broker-5/epoch-3"
	cfg := wal.DefaultConfig(dir)
	cfg.FS, cfg.SegmentSize = proxyHost, 1<<20
	w, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Replay(nil); err != nil {
		t.Fatal(err)
	}
	// A filler record so that the batch starts 17 bytes before the end of the first page.
	batchAt := int64(waltest.PageSize - 17)
	filler := int(batchAt) - wal.HeaderSize - 2*wal.RecordHeaderSize - BatchRecHdr
	if p := appendRec(t, w, 200, make([]byte, filler)); p != wal.HeaderSize+wal.RecordHeaderSize {
		t.Fatalf("filler at %d: the first segment's positions are not file offsets", p)
	}
	ld := NewLoader(readerHost, func(int32) ([]Source, error) { return []Source{{Broker: 5, Epoch: 3, Dir: dir}}, nil }, nil)
	defer ld.Close()
	r := ld.ProxyReader(5, 3)
	if err := r.ReadAt(make([]byte, 64), wal.HeaderSize+wal.RecordHeaderSize); err != nil { // caches page 0
		t.Fatal(err)
	}
	batch := kafkatest.Batch(-1, -1, -1, []byte("across the page"))
	pos := appendRec(t, w, RecProxyBatch, EncodeBatchRec(metadata.TopicID{9}, 2, batch)) + BatchRecHdr
	if int64(pos) != batchAt {
		t.Fatalf("batch at %d, want %d", pos, batchAt)
	}
	l := testLink(t, batch, pos)
	l.Proxy, l.ProxyEpoch, l.Base, l.LeaderEpoch = 5, 3, 40, 2
	got, err := VerifyLink(&l, r)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := recbatch.Frame(got); err != nil || h.Size() != len(batch) || h.BaseOffset != 40 || !bytes.Equal(got[17:], batch[17:]) {
		t.Fatalf("served %+v %v", h, err)
	}
}
