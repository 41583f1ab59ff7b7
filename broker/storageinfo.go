package broker

import (
	"fmt"
	"sort"

	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/broker/partlog"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/wal/walhome"
)

var _ kafka.StorageDescriber = backend{}

// ObjectsLogDir names the object store in DescribeLogDirs answers.
const ObjectsLogDir = "objects"

// LogDirs implements kafka.StorageDescriber: for every partition led here, its bytes
// not in object storage yet per WAL directory (partlog.Partition.Storage), and its
// bytes in object storage (the manifest's ranges).
func (be backend) LogDirs() []kafka.LogDir {
	b := be.b
	v := b.meta.View()
	dirs := map[string][]kafka.LogDirPartition{}
	for _, p := range b.parts.All() {
		st := p.Storage()
		for src, n := range st.WAL {
			d := b.walDirOf(src)
			dirs[d] = append(dirs[d], kafka.LogDirPartition{Topic: p.Topic(), Partition: p.Index(), Bytes: n})
		}
		if t := v.TopicByID(p.ID()); t != nil && int(p.Index()) < len(t.Partitions) {
			var n int64
			for _, o := range t.Partitions[p.Index()].Objects {
				n += o.Bytes
			}
			if n > 0 {
				dirs[ObjectsLogDir] = append(dirs[ObjectsLogDir], kafka.LogDirPartition{Topic: p.Topic(), Partition: p.Index(), Bytes: n})
			}
		}
	}
	out := make([]kafka.LogDir, 0, len(dirs))
	for d, ps := range dirs {
		sort.Slice(ps, func(i, j int) bool {
			if ps[i].Topic != ps[j].Topic {
				return ps[i].Topic < ps[j].Topic
			}
			return ps[i].Partition < ps[j].Partition
		})
		out = append(out, kafka.LogDir{Dir: d, Partitions: ps})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
	return out
}

// walDirOf is the path of a WAL directory (broker and registration epoch).
func (b *Broker) walDirOf(src partlog.SourceID) string {
	home, err := b.homeOf(src.Broker)
	if err != nil {
		return fmt.Sprintf("broker-%d/%s", src.Broker, walhome.EpochDirName(src.Epoch))
	}
	return walhome.EpochDir(home, src.Epoch)
}

// Producers implements kafka.StorageDescriber.
func (be backend) Producers(t *metadata.Topic, index int32) ([]kafka.ProducerInfo, error) {
	p, err := be.b.lookup(t, index, false)
	if err != nil {
		return nil, err
	}
	var out []kafka.ProducerInfo
	for _, ps := range p.Producers() {
		start := int64(-1)
		if first, ok := p.OpenTxn(ps.ID); ok {
			start = first
		}
		out = append(out, kafka.ProducerInfo{ID: ps.ID, Epoch: ps.Epoch, LastSequence: ps.LastSequence, TxnStart: start})
	}
	return out, nil
}
