package broker

import (
	"fmt"

	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal"
	"github.com/weir-io/weir/wal/walhome"
)

// A dead or restarted zone proxy's sealed WAL directory holds proxied batches whose only
// other trace is in their leaders' logs; this file decides when it may go (walgc.go asks).

// proxiedUploaded decides for a sealed directory holding proxied batches (zone routing)
// whether their leaders uploaded everything they may have linked from it. Their offsets
// are in the leaders' logs only. The current leader of each proxied partition is asked
// to fence every link session of the directory's registration (and earlier ones) and to
// give its log end after that fence (fenceEnds): no link into the directory can be
// applied after it, so the ends are proof, written down once (PROXYEND), and the
// directory goes when the manifests reach them. Until every leader answered, it stays.
func (b *Broker) proxiedUploaded(v *metadata.View, s partlog.Source, seal wal.SealInfo, idx partlog.DirIndex) (bool, error) {
	ends, ok, err := partlog.ReadProxyEnds(b.walFS(), s.Dir)
	if err != nil {
		return false, err
	}
	if !ok {
		keys := make([]partlog.Key, 0, len(idx.Proxied))
		for _, p := range idx.Proxied {
			keys = append(keys, partlog.Key{ID: p.Topic, Index: p.Partition})
		}
		got, err := b.fenceEnds(b.ctx, s.Broker, linkFence{epoch: s.Epoch + 1}, keys)
		if err != nil || len(got) < len(keys) {
			b.log.Debug("log ends of proxied partitions not all known yet; the WAL directory stays", "dir", s.Dir, "err", err)
			return false, nil
		}
		for _, k := range keys {
			ends.Ends = append(ends.Ends, partlog.ProxyEndEntry{Topic: k.ID, Partition: k.Index, End: got[k]})
		}
		if err := partlog.WriteProxyEnds(b.walFS(), s.Dir, ends); err != nil {
			return false, fmt.Errorf("broker: %s: %w", s.Dir, err)
		}
	}
	for _, e := range ends.Ends {
		// A topic missing from the view counts as gone only by tombstone (a view older
		// than the topic looks the same): walhome.PartitionNeeded, as for INDEX.
		if walhome.PartitionNeeded(v, e.Topic, e.Partition, e.End-1) {
			return false, nil
		}
	}
	return true, nil
}
