// Package partlog is a partition's log on one broker: the index of its record batches in
// write-ahead logs (this broker's own, and other brokers' on the shared file system for
// the older ranges of its log chain), its high watermark and leader epochs, idempotent
// producer state, transactions (txn.go: open transactions, markers, the last stable
// offset, the aborted index), the tail cache of recent batch bytes, the partition's side
// of the object tier (which offsets objects hold, what is pending upload), and loading a
// partition from the WALs of its chain.
//
// It knows nothing of the Kafka protocol, the controller or object storage I/O: the
// broker feeds it metadata (Apply), WAL callbacks (Prepare, Commit, Rollback) and object
// commits (MarkUploaded); the Kafka front end and the object tier read through its
// methods.
//
// Offsets are assigned by Prepare, which the WAL's committer calls in log order, so offset
// order equals WAL order; a batch becomes readable only when its group is synced (Commit),
// which advances the high watermark. A failed WAL write rolls the partition back
// (Rollback) before any later batch is prepared, so offsets stay dense; it undoes the
// transactional effects of the batches it forgets too.
//
// read_committed readers read below the last stable offset (ReadCommitted, LastStable)
// and filter the aborted transactions (Aborted). What a load cannot find in WALs any
// more comes with the manifest: the producer snapshot says which transactions were open
// at its end, each object range which transactions its abort markers ended.
//
// Formats. The broker's WAL record types are listed in walrec.go; this package decodes
// two of them. A RecBatch payload is topicID [16]byte | partition int32 | the batch. A
// RecLink payload is a Link (link.go), also one link of a peer LinkRequest, big endian,
// read by its version byte (golden: testdata/link-v1.bin, link-v2.bin):
//
//	v1 (87 bytes)  version=1 u8 | topic [16]byte | partition i32 | proxy i32 |
//	               proxyEpoch i64 | pos i64 | size i32 | crc u32 | lastOffsetDelta i32 |
//	               maxTimestamp i64 | producerID i64 | producerEpoch i16 |
//	               baseSequence i32 | base i64 | leaderEpoch i32
//	v2 (89 bytes)  version=2 u8 | the v1 fields | attributes i16
//
// attributes are the batch's transactional bit (never 0 in v2; no other bit is
// carried, a control batch is never linked). A v1 link, every one written before v2,
// reads as non-transactional; AppendLink still writes v1 for such a link.
//
// Lock rules:
//   - Each Partition has one mutex guarding all its state; every exported method takes it
//     briefly and none calls out (network, WAL I/O, other partitions) while holding it.
//   - Set.mu (which partitions this broker leads) may be held while taking a Partition's
//     mutex, never the reverse.
//   - Cache.mu is never held while taking a Partition's mutex: eviction collects its
//     victims, releases the cache lock, then clears each victim under its partition lock.
//   - Loader.mu (open read-only views of other WALs) is a leaf.
package partlog
