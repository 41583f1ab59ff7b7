package partlog

import (
	"errors"
	"fmt"
	"sync"

	"github.com/weir-io/weir/internal/recbatch"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/walhome"
)

// Source is one WAL directory: the WAL a broker wrote in one registration epoch (epoch 0:
// a WAL written before epochs had directories of their own).
type Source struct {
	Broker int32
	Epoch  int64
	Dir    string
	// Reader, when set, is what the collected batches are read through instead of a
	// read-only view: the broker's own WAL for its current directory, so that trimming
	// and pins recognise those batches as its own.
	Reader Reader
}

// Loader reads partitions' batches out of the WALs of their log chains: every WAL
// directory of each log range's broker (a broker writes a new one per registration epoch),
// through read-only views kept for the loader's lifetime (a view picks up new segments
// by itself, so repeated loads do not pile up open files). A sealed directory is read
// only up to its seal (package wal bounds the view).
type Loader struct {
	fs   wal.FS
	dirs func(broker int32) ([]Source, error)

	mu    sync.Mutex
	views map[string]*wal.ReadOnly
	// proxies caches what ProxyReader resolved, by (broker, epoch): listing a broker's
	// directories (and reading its epoch fence token) per link would cost file system
	// round trips on the produce path. Forget drops an entry with its directory.
	proxies map[SourceID]proxySource

	// BytesRead counts the payload bytes of the records scanned (metrics: what a
	// recovery reads of a dead broker's WAL).
	bytesRead func(broker int32, n int)
}

// NewLoader returns a loader; dirs lists the WAL directories of a broker, oldest first. fs nil is the OS file system; bytesRead may be nil.
func NewLoader(fs wal.FS, dirs func(broker int32) ([]Source, error), bytesRead func(broker int32, n int)) *Loader {
	if fs == nil {
		fs = wal.OSFS()
	}
	if bytesRead == nil {
		bytesRead = func(int32, int) {}
	}
	return &Loader{fs: fs, dirs: dirs, views: map[string]*wal.ReadOnly{}, proxies: map[SourceID]proxySource{}, bytesRead: bytesRead}
}

// View returns the read-only view of one WAL directory.
func (l *Loader) View(dir string) (*wal.ReadOnly, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ro := l.views[dir]; ro != nil {
		return ro, nil
	}
	ro, err := wal.OpenReadOnly(dir, l.fs)
	if err != nil {
		return nil, err
	}
	l.views[dir] = ro
	return ro, nil
}

// Forget closes the view of a directory that was removed.
func (l *Loader) Forget(dir string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ro := l.views[dir]; ro != nil {
		ro.Close()
		delete(l.views, dir)
	}
	for id, ps := range l.proxies {
		if ps.dir == dir {
			delete(l.proxies, id)
		}
	}
}

// proxySource is a resolved ProxyReader.
type proxySource struct {
	dir string
	r   Reader
}

// LoadOptions adjust a Load.
type LoadOptions struct {
	// Other receives the records of a scanned WAL that are not batch records (legacy
	// committed offsets), with the source they came from; nil skips them.
	Other func(src Source, typ byte, payload []byte) error
	// MaxEpoch limits the directories read of a broker to epochs <= its entry (a
	// recovery reads only the fenced registrations' WALs).
	MaxEpoch map[int32]int64
	// AcceptCorruption goes on after a damaged record in the middle of a WAL (an
	// operator accepted the loss): what was read before it is kept, the rest of that
	// directory is skipped, and the partitions' loads then find the gap.
	AcceptCorruption bool
}

// LoadStats says what a Load read.
type LoadStats struct {
	Dirs    int   // WAL directories scanned
	Records int   // records scanned
	Bytes   int64 // payload bytes scanned
	// Skipped names the directories whose scan stopped at a damaged record
	// (AcceptCorruption).
	Skipped []string
}

// Load scans each WAL directory that may hold some of the given ranges once and
// Collects, into each partition, the batches that fall in its ranges.
func (l *Loader) Load(parts []*Partition, ranges map[*Partition][]LogRange, opts LoadOptions) (LoadStats, error) {
	var st LoadStats
	byBroker := map[int32][]*Partition{}
	for _, p := range parts {
		seen := map[int32]bool{}
		for _, r := range ranges[p] {
			if !seen[r.Broker] {
				seen[r.Broker] = true
				byBroker[r.Broker] = append(byBroker[r.Broker], p)
			}
		}
	}
	for broker, ps := range byBroker {
		srcs, err := l.dirs(broker)
		if err != nil {
			return st, fmt.Errorf("partlog: WAL directories of broker %d: %w", broker, err)
		}
		want := map[metadata.TopicID]map[int32]*Partition{}
		for _, p := range ps {
			if want[p.id] == nil {
				want[p.id] = map[int32]*Partition{}
			}
			want[p.id][p.index] = p
		}
		for _, src := range srcs {
			if max, ok := opts.MaxEpoch[broker]; ok && src.Epoch > max {
				continue
			}
			if err := l.scan(src, want, ranges, opts, &st); err != nil {
				return st, err
			}
		}
	}
	return st, nil
}

func (l *Loader) scan(src Source, want map[metadata.TopicID]map[int32]*Partition, ranges map[*Partition][]LogRange, opts LoadOptions, st *LoadStats) error {
	ro, err := l.View(src.Dir)
	if err != nil {
		return err
	}
	st.Dirs++
	// A sealed directory never changes: what it holds is written down once (INDEX), so
	// that it can be deleted when all of it is in object storage without reading it again.
	_, sealed, err := wal.ReadSeal(l.fs, src.Dir)
	if err != nil {
		return fmt.Errorf("partlog: %s: %w", src.Dir, err)
	}
	var idx *DirIndex
	if sealed {
		if _, ok, _ := ReadDirIndex(l.fs, src.Dir); !ok {
			idx = &DirIndex{}
		}
	}
	var own Reader = ro
	if src.Reader != nil {
		own = src.Reader
	}
	_, err = ro.Scan(func(typ byte, payload []byte, pos wal.Pos) error {
		st.Records++
		st.Bytes += int64(len(payload))
		l.bytesRead(src.Broker, len(payload))
		switch typ {
		case RecBatch:
		case RecLink:
			return l.collectLink(src, own, want, ranges, idx, payload, pos)
		case RecProxyBatch:
			// Another broker's partition: part of its log only through the leader's link.
			if idx != nil {
				if id, index, _, err := DecodeBatchRec(payload); err == nil {
					idx.NoteProxied(id, index)
				}
			}
			return nil
		default:
			if opts.Other != nil {
				return opts.Other(src, typ, payload)
			}
			return nil
		}
		id, index, batch, err := DecodeBatchRec(payload)
		if err != nil {
			return fmt.Errorf("partlog: %s at %d: %w", src.Dir, pos, err)
		}
		h, err := recbatch.Parse(batch)
		if err != nil {
			return fmt.Errorf("partlog: %s at %d: %w", src.Dir, pos, err)
		}
		if idx != nil {
			idx.Note(id, index, h.LastOffset())
		}
		p := want[id][index]
		if p == nil {
			return nil
		}
		for _, r := range ranges[p] {
			if r.Broker == src.Broker && r.Holds(h.BaseOffset) {
				in := own
				if src.Reader == nil {
					// Read later through a view of a directory this process does not
					// write (a fenced broker's, or its own earlier one): every read is
					// checked like a linked batch's (CRC, length, magic, count).
					in = &linkReader{in: ro, base: h.BaseOffset, epoch: h.LeaderEpoch, crc: h.CRC, lastDelta: h.LastOffsetDelta}
				}
				p.collect(&h, batch, in, SourceID{src.Broker, src.Epoch}, pos+BatchRecHdr, len(batch))
				break
			}
		}
		return nil
	})
	if err != nil && opts.AcceptCorruption && errors.Is(err, wal.ErrCorrupt) {
		st.Skipped = append(st.Skipped, fmt.Sprintf("%s: %v", src.Dir, err))
		return nil // nothing to index: the directory was not read whole
	}
	if err != nil {
		return fmt.Errorf("partlog: scanning %s: %w", src.Dir, err)
	}
	if idx != nil {
		if err := walhome.WriteDirIndex(l.fs, src.Dir, idx); err != nil {
			return fmt.Errorf("partlog: %s: %w", src.Dir, err)
		}
	}
	return nil
}

// IndexDir scans a sealed directory that has no INDEX yet, only to write one.
func (l *Loader) IndexDir(src Source) error {
	var st LoadStats
	return l.scan(src, nil, nil, LoadOptions{Other: func(Source, byte, []byte) error { return nil }}, &st)
}

// collectLink takes a RecLink at pos of src (read through own) into its partition, if
// wanted, reading the batch from the proxy's WAL.
func (l *Loader) collectLink(src Source, own Reader, want map[metadata.TopicID]map[int32]*Partition, ranges map[*Partition][]LogRange, idx *DirIndex, payload []byte, pos wal.Pos) error {
	lk, _, err := DecodeLink(payload)
	if err != nil {
		return fmt.Errorf("partlog: %s at %d: %w", src.Dir, pos, err)
	}
	if idx != nil {
		idx.Note(lk.Topic, lk.Partition, lk.Last())
	}
	p := want[lk.Topic][lk.Partition]
	if p == nil {
		return nil
	}
	for _, r := range ranges[p] {
		if r.Broker == src.Broker && r.Holds(lk.Base) {
			p.CollectLink(&lk, l.ProxyReader(lk.Proxy, lk.ProxyEpoch), own, pos)
			return nil
		}
	}
	return nil
}

// ProxyReader returns what reads the WAL directory of broker's registration epoch (a
// proxy's, named by a link): this broker's own WAL if it is its current one, else a
// read-only view. A directory that is gone (collected once object storage held all of
// it) reads as a storage error; the index entries pointing there are below what objects
// hold and are dropped, so only a reader racing with that finds it.
func (l *Loader) ProxyReader(broker int32, epoch int64) Reader {
	return &reopeningReader{open: func() (Reader, error) { return l.proxyReader(broker, epoch) }}
}

// proxyReader finds the reader of broker's directory of epoch, cached once found (listing
// a broker's directories and reading its token for every link would cost a round trip to
// the shared file system each); a failure is not kept (reopeningReader asks again at the
// next read).
func (l *Loader) proxyReader(broker int32, epoch int64) (Reader, error) {
	id := SourceID{broker, epoch}
	l.mu.Lock()
	ps, ok := l.proxies[id]
	l.mu.Unlock()
	if ok {
		return ps.r, nil
	}
	srcs, err := l.dirs(broker)
	if err != nil {
		return nil, err
	}
	for _, s := range srcs {
		if s.Epoch != epoch {
			continue
		}
		var r Reader = s.Reader
		if r == nil {
			ro, err := l.View(s.Dir)
			if err != nil {
				return nil, err
			}
			r = ro
		}
		l.mu.Lock()
		l.proxies[id] = proxySource{dir: s.Dir, r: r}
		l.mu.Unlock()
		return r, nil
	}
	return nil, fmt.Errorf("WAL of broker %d epoch %d not found", broker, epoch)
}

// Close closes the read-only views.
func (l *Loader) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for dir, ro := range l.views {
		ro.Close()
		delete(l.views, dir)
	}
	clear(l.proxies)
}
