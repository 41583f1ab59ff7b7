package walhome

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
)

// A sealed WAL directory never changes again. The first broker that scans one whole
// writes down which partitions it holds, up to which offset, in INDEX (JSON,
// format_version 2), so the directory can be deleted once object storage holds all of it,
// decided from the metadata alone (PartitionNeeded). A directory holding proxied batches
// also gets PROXYEND (JSON, format_version 1), the proxied partitions' log ends.

// DirIndexFile is the index's file name in a sealed WAL directory.
const DirIndexFile = "INDEX"

// DirIndexVersion is the format version of INDEX written; version 1 (no proxied
// partitions) is still read, anything else is refused.
const DirIndexVersion = 2

// ErrDirIndexVersion: an INDEX of a format this build does not read.
var ErrDirIndexVersion = errors.New("walhome: unsupported WAL directory index version")

// DirIndex lists the partitions of a sealed WAL directory and the last offset it holds of
// each. A scanner builds one with Note and NoteProxied and writes it with WriteDirIndex.
type DirIndex struct {
	FormatVersion int           `json:"format_version"`
	Partitions    []DirIndexRef `json:"partitions"`
	// Proxied lists the partitions of other leaders whose batches this directory holds as
	// a proxy: their leaders' logs may link them, at offsets only the leaders know (the
	// GC asks them, PROXYEND).
	Proxied []DirIndexProxied `json:"proxied,omitempty"`

	last    map[partKey]int64 // while scanning
	proxied map[partKey]bool
}

type partKey struct {
	id    metadata.TopicID
	index int32
}

// DirIndexRef is one partition of a DirIndex.
type DirIndexRef struct {
	Topic      metadata.TopicID `json:"topic"`
	Partition  int32            `json:"partition"`
	LastOffset int64            `json:"last_offset"`
}

// DirIndexProxied is one partition a directory holds batches of as a proxy.
type DirIndexProxied struct {
	Topic     metadata.TopicID `json:"topic"`
	Partition int32            `json:"partition"`
}

// Note records that the directory holds partition (id, partition) up to offset last.
func (d *DirIndex) Note(id metadata.TopicID, partition int32, last int64) {
	if d.last == nil {
		d.last = map[partKey]int64{}
	}
	k := partKey{id, partition}
	if old, ok := d.last[k]; !ok || last > old {
		d.last[k] = last
	}
}

// NoteProxied records that the directory holds batches of (id, partition) as a proxy.
func (d *DirIndex) NoteProxied(id metadata.TopicID, partition int32) {
	if d.proxied == nil {
		d.proxied = map[partKey]bool{}
	}
	d.proxied[partKey{id, partition}] = true
}

// ReadDirIndex reads a directory's INDEX; ok is false when there is none.
func ReadDirIndex(fsys wal.FS, dir string) (DirIndex, bool, error) {
	var d DirIndex
	buf, ok, err := readFile(fsys, filepath.Join(dir, DirIndexFile))
	if err != nil || !ok {
		return d, ok, err
	}
	if err := json.Unmarshal(buf, &d); err != nil {
		return d, false, fmt.Errorf("walhome: %s: %w", filepath.Join(dir, DirIndexFile), err)
	}
	if d.FormatVersion != DirIndexVersion && d.FormatVersion != 1 {
		return d, false, fmt.Errorf("%w %d in %s", ErrDirIndexVersion, d.FormatVersion, dir)
	}
	return d, true, nil
}

// WriteDirIndex writes INDEX atomically (temp file, sync, rename, directory sync) from
// what Note and NoteProxied recorded, sorted; two brokers writing it at once write the
// same content.
func WriteDirIndex(fsys wal.FS, dir string, d *DirIndex) error {
	d.FormatVersion = DirIndexVersion
	for k, last := range d.last {
		d.Partitions = append(d.Partitions, DirIndexRef{Topic: k.id, Partition: k.index, LastOffset: last})
	}
	sort.Slice(d.Partitions, func(i, j int) bool {
		a, b := d.Partitions[i], d.Partitions[j]
		if a.Topic != b.Topic {
			return string(a.Topic[:]) < string(b.Topic[:])
		}
		return a.Partition < b.Partition
	})
	if d.Partitions == nil {
		d.Partitions = []DirIndexRef{}
	}
	for k := range d.proxied {
		d.Proxied = append(d.Proxied, DirIndexProxied{Topic: k.id, Partition: k.index})
	}
	sort.Slice(d.Proxied, func(i, j int) bool {
		a, b := d.Proxied[i], d.Proxied[j]
		if a.Topic != b.Topic {
			return string(a.Topic[:]) < string(b.Topic[:])
		}
		return a.Partition < b.Partition
	})
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return writeFileAtomic(fsys, dir, DirIndexFile, data)
}

// ProxyEndsFile records, in a sealed WAL directory holding proxied batches, the log end
// of each proxied partition as its leader reported it once no link into the directory
// could still be applied: everything the leaders linked from the directory is below.
const ProxyEndsFile = "PROXYEND"

// ProxyEnds is the content of PROXYEND.
type ProxyEnds struct {
	FormatVersion int             `json:"format_version"`
	Ends          []ProxyEndEntry `json:"ends"`
}

// ProxyEndEntry is one proxied partition's log end.
type ProxyEndEntry struct {
	Topic     metadata.TopicID `json:"topic"`
	Partition int32            `json:"partition"`
	End       int64            `json:"end"`
}

// ReadProxyEnds reads a directory's PROXYEND; ok is false when there is none.
func ReadProxyEnds(fsys wal.FS, dir string) (ProxyEnds, bool, error) {
	var e ProxyEnds
	buf, ok, err := readFile(fsys, filepath.Join(dir, ProxyEndsFile))
	if err != nil || !ok {
		return e, ok, err
	}
	if err := json.Unmarshal(buf, &e); err != nil {
		return e, false, fmt.Errorf("walhome: %s: %w", filepath.Join(dir, ProxyEndsFile), err)
	}
	if e.FormatVersion != 1 {
		return e, false, fmt.Errorf("walhome: %s: format version %d is not supported", filepath.Join(dir, ProxyEndsFile), e.FormatVersion)
	}
	return e, true, nil
}

// WriteProxyEnds writes PROXYEND atomically.
func WriteProxyEnds(fsys wal.FS, dir string, e ProxyEnds) error {
	e.FormatVersion = 1
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return writeFileAtomic(fsys, dir, ProxyEndsFile, data)
}

// readFile reads a small file whole; ok is false when it does not exist.
func readFile(fsys wal.FS, path string) ([]byte, bool, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	buf := make([]byte, st.Size())
	if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
		return nil, false, err
	}
	return buf, true, nil
}

// writeFileAtomic writes dir/name atomically (temp file, sync, rename, directory sync);
// two brokers writing it at once write the same content, or either one whole.
func writeFileAtomic(fsys wal.FS, dir, name string, data []byte) error {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(dir, name+".tmp-"+hex.EncodeToString(rnd[:]))
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}
