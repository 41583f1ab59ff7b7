// Package compact is the log cleaner's record logic for topics with cleanup.policy
// compact (Kafka's LogCleaner, rebuilt for objects): an offset map of each key's latest
// offset, and the rewrite of stored record batches that keeps, per key, only its latest
// record. It reads and writes bytes only; broker/tier runs it on a partition's objects
// and commits the result (tier/compact.go).
//
// The rules, as Kafka's cleaner applies them:
//
//   - The offset map (OffsetMap) holds a 16-byte hash of each key (SHA-256, truncated;
//     Kafka uses MD5) and the key's latest offset in the dirty section it was built from.
//     Its size is bounded (MaxEntries): the tier stops adding ranges once it is full
//     and cleans the rest in a later pass.
//   - A record is kept when its key is not in the map or its offset is at least the
//     map's. Records with a null key are kept: produce refuses them for a compacted
//     topic (INVALID_RECORD, recbatch.RecordRules.RequireKeys, as Kafka's
//     LogValidator), so only records written before the topic became compacted have
//     none, and dropping them would lose data a client was told was written.
//   - A batch keeps its base offset and lastOffsetDelta when records inside it are
//     removed, so offsets become sparse and stay monotonic; a batch left with no record
//     is dropped, except the last batch of a rewritten range, kept empty so the range's
//     last offset stays in its object (objread serves up to it).
//   - Tombstones (null value): the first clean that keeps one sets the batch's delete
//     horizon (now + delete.retention.ms; KIP-534, recbatch.AttrDeleteHorizon); a clean
//     after the horizon removes them.
//   - Transactions: data batches of aborted transactions (Cleaner.Aborted) are removed
//     and never enter the map; a transaction marker is removed once no data of its
//     transaction remains before it in the log and its delete horizon (set like a
//     tombstone's) has passed; the aborted-transaction entries of removed abort markers
//     go with them (Result.DroppedMarkers).
//   - Compressed batches are decompressed, filtered and compressed again with their
//     codec; CRCs are recomputed. A batch nothing changes in is kept byte for byte.
package compact
