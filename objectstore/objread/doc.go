// Package objread is the read path from data objects in object storage: what the
// broker's Fetch uses for offsets that have left the WAL. Objects are in the objfmt
// format (objectstore/objfmt); a partition's manifest is a list of ObjectRefs.
//
// S3 requests cost money and tens of milliseconds each, so the Reader is built to issue
// few of them: it caches parsed indexes and verified blocks, coalesces concurrent loads
// of the same thing into one request, fetches adjacent blocks with one ranged GET, and
// prefetches ahead of sequential consumers in large GETs.
//
// # A read
//
//	Read(offset, maxBytes, objs)
//	  index of objs[0]      cache, or GET tail (+ GET index when it is not in the tail)
//	  blocks to read        PartitionIndex.Blocks(offset, maxBytes); if objs[0] is used
//	                        up, whole blocks of objs[1], ... that still fit
//	  blocks                cache, or GETs of runs of adjacent missing blocks (a run
//	                        longer than MaxGetBytes in several GETs, in parallel)
//	  batches               SeekBatch(offset), whole batches up to maxBytes (>= 1)
//
// Only batches within each ref's [FirstOffset, LastOffset] are served, so objects that
// overlap (a partition re-uploaded after a failover) never yield an offset twice.
//
// # Caches
//
// Two LRUs bounded by bytes. The index cache holds parsed indexes (objfmt.Index), sized
// by an estimate of their memory (56 bytes a block, 112 a partition). The block cache
// holds verified blocks: the bytes, one allocation per block, and their batches, split
// once when fetched, so a hit costs no CRC and no parsing. A block is verified (block
// CRC32C, every batch CRC, dense offsets, via objfmt.DecodeBlocks) before it is cached
// or served; a corrupt block is neither, and the read fails with ErrCorrupt. An entry
// larger than its whole cache is used once and not cached. Forget drops an object's
// entries when retention or garbage collection deletes it; the block cache groups
// entries by object so that costs only that object's blocks.
//
// Read always returns a new slice: cached bytes are never handed out, so a caller may
// modify what it gets.
//
// # Coalescing
//
// A small singleflight (flight.go): the first reader to miss a key (an object's index,
// a block) owns its load; readers that miss the same key meanwhile wait for that load
// instead of issuing their own request. A reader claims all the blocks it misses under
// one lock, so two readers of the same range never split it into two GETs. The owner
// caches before it publishes, and checks the cache again after claiming, so a load that
// finished a moment earlier is not repeated. A waiter whose owner's context ended (its
// client went away, or Close stopped a readahead) loads again itself.
//
// # Readahead
//
// The Reader remembers, per partition, where its last Read ended (at most 100,000
// partitions). A Read starting there is a sequential consumer: the Reader then looks at
// the ReadaheadBytes after the end of this read (into later objects of objs too). While
// less than one GET's worth of that window (MaxGetBytes, at most half the window) is
// missing (neither cached nor in flight), it does nothing; otherwise it fetches all the
// missing blocks of the window in the background, in GETs of about MaxGetBytes that run
// in parallel. A consumer reading 1 MiB at a time with a 16 MiB window and 4 MiB GETs so
// starts with 4 GETs in flight and then issues one 4 MiB GET per 4 MiB it reads, and
// its reads hit the cache. Background fetches use a context of their own that Close
// cancels, and that also ends with the owner a Read's context carries
// (ReadaheadContext: the broker passes the client's connection, so a consumer that goes
// away stops its prefetches); at most MaxReadaheads run at once, and a read that finds no free slot does
// not wait (weir_objread_readahead_blocks_total{result="skipped"}). Prefetched blocks
// that a Read uses count as "used", those evicted unread as "wasted".
//
// # Parallel GETs and their bound
//
// One GET stream of an object store is slower than several (S3 serves a connection at
// tens of MB/s, after tens of ms to the first byte), so a run of missing blocks longer
// than MaxGetBytes is fetched as several ranged GETs at once; each block is still
// verified and published as soon as its GET delivers it. MaxGets bounds the GETs in
// flight of the whole Reader (reads, readahead and index loads); a read waits for a
// slot, giving up when its context ends. The broker's Fetch reads the cold partitions of
// one request concurrently (broker/kafka/fetch.go), and this bound is what keeps many
// consumers from opening a connection each.
//
// # Errors
//
// Store errors are returned wrapped (%w), so objectstore.IsTransient and the
// objectstore sentinels work on them. ErrCorrupt wraps objfmt's errors and names the
// object; ErrNotInObject means the offset or partition is not where the manifest said.
//
// # Metrics (when Config.Registerer is set; unregistered by Close)
//
//	weir_objread_cache_hits_total{kind}          kind = index | block
//	weir_objread_cache_misses_total{kind}
//	weir_objread_cache_coalesced_total{kind}     waited for another reader's load
//	weir_objread_cache_bytes{kind}               gauge
//	weir_objread_requests_total{purpose}         purpose = index | block | readahead
//	weir_objread_fetched_bytes_total{purpose}
//	weir_objread_readahead_blocks_total{result}  result = used | wasted | skipped
//	weir_objread_read_bytes_total                bytes returned by Read
package objread
