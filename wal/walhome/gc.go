package walhome

import "github.com/weir-io/weir/metadata"

// The WAL directory GC deletes a sealed directory once the metadata says nothing needs
// it: every partition it holds is in object storage past what the directory holds,
// below its log start, or of a deleted topic. A view may be stale (a broker cut off
// from the controllers keeps its last one), so only what a staler view can only make
// MORE needed is trusted: uploaded-through and log-start offsets only grow, partitions
// are only added, and a deleted topic stays deleted (its ID is tombstoned, IDs are never
// reused). A topic the view does not know and has not tombstoned may have been created
// after the view: the directory stays. So whatever the view's age, deleting from it
// never deletes what a newer view would keep ("a view at least as new as the seal"
// holds for every fact the decision uses).

// PartitionNeeded reports whether a sealed directory holding partition (topic,
// partition) up to offset last is still needed by view v. For a PROXYEND entry (an
// exclusive log end), ask with last = end-1.
func PartitionNeeded(v *metadata.View, topic metadata.TopicID, partition int32, last int64) bool {
	t := v.TopicByID(topic)
	if t == nil {
		return !v.TopicDeleted(topic)
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return true // a partition created after this view
	}
	mp := t.Partitions[partition]
	return mp.UploadedThrough() <= last && mp.LogStartOffset <= last
}
