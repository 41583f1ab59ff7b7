package partlog

import (
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/walhome"
)

// The index files of a sealed WAL directory (INDEX, PROXYEND) belong to package
// wal/walhome with the rest of the WAL home's layout; these names keep callers of
// partlog compiling.

// Aliases of walhome's index types.
type (
	DirIndex        = walhome.DirIndex
	DirIndexRef     = walhome.DirIndexRef
	DirIndexProxied = walhome.DirIndexProxied
	ProxyEnds       = walhome.ProxyEnds
	ProxyEndEntry   = walhome.ProxyEndEntry
)

// Names and versions of the index files (walhome).
const (
	DirIndexFile    = walhome.DirIndexFile
	DirIndexVersion = walhome.DirIndexVersion
	ProxyEndsFile   = walhome.ProxyEndsFile
)

// ErrDirIndexVersion is walhome.ErrDirIndexVersion.
var ErrDirIndexVersion = walhome.ErrDirIndexVersion

// ReadDirIndex is walhome.ReadDirIndex.
func ReadDirIndex(fsys wal.FS, dir string) (DirIndex, bool, error) {
	return walhome.ReadDirIndex(fsys, dir)
}

// ReadProxyEnds is walhome.ReadProxyEnds.
func ReadProxyEnds(fsys wal.FS, dir string) (ProxyEnds, bool, error) {
	return walhome.ReadProxyEnds(fsys, dir)
}

// WriteProxyEnds is walhome.WriteProxyEnds.
func WriteProxyEnds(fsys wal.FS, dir string, e ProxyEnds) error {
	return walhome.WriteProxyEnds(fsys, dir, e)
}
