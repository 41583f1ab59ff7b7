// Package wal is Weir's write-ahead log: one log per broker, in one directory,
// holding opaque typed records. A record is durable (written and fdatasync'ed)
// before its Entry.Done reports success, and many concurrent appends share one
// write and one fdatasync (group commit).
//
// # Layers
//
// record.go frames records on byte slices and streams (AppendRecord,
// DecodeRecord, Reader) and knows the segment header. wal.go, commit.go,
// segment.go and replay.go manage segment files, the committer goroutine and
// recovery. fence.go (the fence token), epochfence.go (the per-broker epoch
// fence token), uncached.go (O_DIRECT reads), seal.go (Seal, the taker's side),
// scan.go (reading a directory with fresh opens) and readonly.go (ReadOnly)
// serve failover: another broker reading this log.
//
// # Segment files
//
// The log is a sequence of segment files named by their base position, e.g.
// 00000000000000000000.wal, 00000000000067108721.wal. All integers are little
// endian.
//
//	segment file
//	+------------------+----------+----------+-----+----------+----------------------+
//	| header (24 B)    | record 0 | record 1 | ... | record n | 0 0 0 0 ... (zeros / |
//	|                  |          |          |     |          |  end of file)         |
//	+------------------+----------+----------+-----+----------+----------------------+
//	^ offset 0         ^ offset 24                            ^ end
//
//	segment header (24 bytes)
//	 0               8            12                     20          24
//	+---------------+------------+----------------------+-----------+
//	| magic         | version    | base                 | crc32c    |
//	| "WEIR-WAL"    | u32 = 1    | u64 (log position of | of bytes  |
//	|               |            |  file offset 0)      | 0..20     |
//	+---------------+------------+----------------------+-----------+
//
//	record
//	 0          4          8      9
//	+----------+----------+------+----------------------------+
//	| length   | crc32c   | type | payload (length-1 bytes)   |
//	| u32      | u32      | u8   |                            |
//	+----------+----------+------+----------------------------+
//	length = 1 + len(payload), so it is never 0 for a record.
//	crc32c = CRC-32 (Castagnoli) over type and payload.
//
// A length of 0 (preallocated zeros) or the end of the file ends the records
// of a segment. A length above MaxPayloadSize+1 or a checksum mismatch is
// corrupt (ErrCorrupt); a record cut short by the end of the file is torn
// (ErrTorn).
//
// # Positions
//
// A Pos is a logical byte position in the whole log: segment base + offset in
// the segment file. A record's Pos is that of its payload. When a record does
// not fit in the active segment, the log rolls: the next segment's base is the
// position just past the last record of the previous one, so positions are
// dense apart from segment headers, and the next segment's base tells a replay
// exactly where the previous segment's records end. Bytes after that point
// (preallocated zeros, or the remains of a failed write) are never read as
// records. A record larger than SegmentSize gets a segment sized to fit.
//
// The log also rolls at the first group after the active segment's first record
// is Config.SegmentMaxAge old (by Config.Now), with room left: the same roll, so
// the format and every invariant above are those of a full segment. Trimming
// removes whole segments only, and without it a slow log would keep up to
// SegmentSize of records per segment however old. An empty segment never rolls
// by age.
//
// # Group commit
//
// Append queues an entry (blocking only when QueueDepth entries are queued).
// One committer goroutine takes all queued entries up to MaxGroupBytes that
// fit in the active segment, calls their Prepare hooks in order, copies them
// (Head, then Payload) into one buffer and writes it with one WriteAt; one
// syncer goroutine then syncs it with one fdatasync, checks the fence token (with
// Config.Fence; see Fencing), publishes it and calls the Done callbacks in order.
// The two form a pipeline up to 16 groups deep: while an fdatasync is in flight,
// the committer takes, prepares and writes every group that arrives, and the
// syncer's next fdatasync covers all of them (each written before it was handed
// over, so before that sync started: a group is acked only after a sync that
// started after its own write). An entry so waits for the end of the sync in
// flight and one more, never for a group queued in between. The committer waits for the
// syncer to finish every earlier group before a segment roll (a new segment must
// not exist on disk before the records below its base are synced) and after a
// group whose write failed (its Done, which may undo what Prepare did, runs before
// any later entry is prepared).
//
// A failed write fails the group (ErrNoSpace for ENOSPC, ErrIO for other I/O
// errors) without moving the write position. Without Config.Fence (a directory
// no other host reads) the next group starts a new segment, so that the failed
// group's bytes can never be mistaken for records: the new segment's base is
// the failed group's position, and a segment's records are read only up to the
// next one's base. With Config.Fence a failed write fails the WAL for good
// (ErrFailed wrapping the write's error; the group written before it, whose
// fdatasync may still be running, is acked as usual): the failed bytes may
// land later (an NFS WRITE that reached the server although the client
// reported an error, a page written back after the error), and then they are
// valid records continuing the old segment from the very position where the
// new one starts. A reader whose listing does not show the new segment (a
// stale NFS listing; scans find unlisted segments by name only where the
// records they read end) would read the late records there instead of the
// acked ones of the new segment, and a taker would seal that: acked records
// lost, their offsets given again (TestStaleListingNeverSealsLateBytes). So
// nothing is written after a failed write in a directory others read; the
// broker starts again under a new registration, in a new directory. On NFS
// write errors mostly surface at fdatasync anyway. A failed fdatasync fails
// the WAL for good (ErrFailed): the kernel may have dropped the dirty pages
// and marked them clean, so a retried fsync could report success for data
// that is lost (PostgreSQL "fsyncgate"). Reads of synced data keep working.
//
// # Preallocation
//
// With Config.Preallocate (the default) the next segment is created in the
// background under a temporary name: fallocate reserves the space (so ENOSPC
// shows up there, and the extents are contiguous), then the whole file is
// overwritten with zeros and fdatasync'ed. A roll then only writes and syncs
// the 24-byte header, renames the file and syncs the directory. Appends
// overwrite already-initialized blocks of a file whose size does not change,
// so fdatasync only flushes data. Median WriteAt+fdatasync latency measured on
// the development machine (ext4 on a virtio disk, 2 cores, otherwise idle;
// ranges over three runs of 400 writes):
//
//	write size   append to file   fallocate only   fallocate + zero-fill
//	4 KiB        0.26-0.54 ms     0.26-0.51 ms     0.25-0.29 ms
//	64 KiB       0.35-0.81 ms     0.43-0.80 ms     0.32-0.42 ms
//	1 MiB        1.2-1.6 ms       1.4-1.7 ms       1.2-1.3 ms
//
// Appending and fallocate-only both make fdatasync commit a journal
// transaction (new size, or unwritten extents turning written); zero-filled
// blocks do not. The cost is writing every segment twice (zero-filling 64 MiB
// took 60-300 ms, off the append path). While other builds loaded the machine
// (load average 5-6) the three modes were within noise of each other (medians
// 0.3-1 ms, p99 up to 20 ms), and BenchmarkAppendParallel (1 KiB records, 64
// appenders, about 32 records per fdatasync) varied between runs from 18 to 65
// MB/s in every mode. Run BenchmarkSyncLatency and BenchmarkAppendParallel to
// measure a file system. On NFS (the production target) fallocate may be
// unsupported (preallocation then only zero-fills) and zero-filling doubles
// the bytes sent to the server: measure, and consider Config.NoZeroFill or
// Preallocate false there.
//
// # Fencing
//
// When a broker dies, another ("taker") takes its partitions over by reading
// its WAL directory to the end. Storage fencing makes that safe while the old
// owner may still be running: for every record, either the taker's read sees
// it, or the owner never acks it. A directory is written by one owner for its
// whole life (one directory per broker registration epoch).
//
// The owner (Config.Fence) owns the fence token, the file FENCE: Open refuses a
// fenced directory (ErrFenced) and writes the owner record, synced, before any
// append; after every group's write and fdatasync, and before any Done
// callback, the committer opens FENCE afresh and reads it. Unless it still
// holds this WAL's owner record (its random Instance) and no fence record, the
// group fails with ErrFenced and the WAL fails for good, like after a failed
// fdatasync; reads of data synced before keep working. A second Open of the
// directory (the same identity started twice) replaces the owner record, so
// the first writer stops at its next group.
//
// The taker calls Seal (or Fence first, then Seal): it writes the fence record
// in place (pwrite at 0, fsync; never a rename, which would give FENCE a new
// inode that an NFS client with the old one open would not see), reads the
// directory to its end with fresh opens and records the end in SEAL.
//
//	FENCE, 256 bytes: two records of 128 bytes, little endian
//	 0             128            256
//	+--------------+--------------+
//	| fence record | owner record |   fence record: all zeros until a taker
//	| (takers)     | (owner Open) |   fences; then state 2. owner: state 1.
//	+--------------+--------------+
//
//	FENCE record (128 bytes)
//	 0          8         12      16         24        32       36         100        124     128
//	+----------+---------+-------+----------+---------+--------+----------+----------+-------+
//	| magic    | version | state | instance | time    | name   | name     | reserved | crc32c|
//	| WEIRFNCE | u32 = 1 | u32   | u64      | i64 ns  | length | 64 bytes | zeros    | of    |
//	|          |         | 1 open| random   | (diag.) | u32    | zero pad |          | 0..124|
//	|          |         |2 fenced          |         |        |          |          |       |
//	+----------+---------+-------+----------+---------+--------+----------+----------+-------+
//
// The two writers never write the same bytes: the owner's Open writes only the
// owner record. So a taker that fences between the Open's read of FENCE and its
// write is not undone (the owner's first check, or its Replay, sees the fence).
// A fence record that cannot be decoded (damage, a torn write, another version)
// counts as fenced; an owner record that cannot be decoded is not the owner's;
// a FENCE that cannot be opened or read fails the check. No damage can unfence.
// A second Fence keeps the first taker's record (rewriting it unchanged).
//
//	SEAL (128 bytes)
//	 0          8         12        16      24            32      40        48      56       60          124      128
//	+----------+---------+---------+-------+-------------+-------+---------+-------+--------+-----------+--------+
//	| magic    | version | segments| end   | last segment| start | records | time  | name   | name      | crc32c |
//	| WEIRSEAL | u32 = 1 | u32     | i64   | i64 (base)  | i64   | i64     | i64 ns| length | 64 bytes  | of     |
//	|          |         |         |       |             |       |         |       | u32    | zero pad  | 0..124 |
//	+----------+---------+---------+-------+-------------+-------+---------+-------+--------+-----------+--------+
//
// Seal: (1) Fence; (2) if SEAL exists, return it (the first seal wins); (3)
// scan the directory with fresh opens to its end (a bad record before the last
// segment is ErrCorrupt, in the last one it is the torn or unsynced tail); (4)
// commit every segment read, then read the last one again up to the end found
// (if something vanished, scan again); (5) write SEAL to a temporary file, sync
// it, hard-link it to SEAL (exclusive: a taker that loses the race returns the
// winner's seal), remove the temporary name, sync the directory. OpenReadOnly
// of a sealed directory bounds Scan and ReadAt to End and ignores segments
// after LastSegment, whatever bytes a late, fenced writer may still add. Open
// refuses a sealed or fenced directory, with or without Config.Fence.
//
// # Why exactly one holds, on NFS
//
// The owner O and the taker T are clients of one NFS server S, which applies
// every operation in one order and, once a WRITE is committed, shows it to every
// later GETATTR and READ. Let a group's write and fdatasync end at W (WRITE and
// COMMIT answered: the group is stable on S), let O's check read FENCE's state
// on S at C > W (the open's revalidation and, if the file changed, the READ),
// and let T's fence record be committed on S at F. T's scan opens and reads
// every segment after F.
//
//   - C before F: W < C < F, so the group was stable on S before T opened any
//     segment. T's fresh open gets the size and change attribute from S, drops
//     any page cached before, and reads the group. T sees it.
//   - C after F: O's open finds FENCE's change attribute changed, drops its
//     cached pages of FENCE and reads the fence record from S. O does not ack.
//
// If O used pages validated by a revalidation answered before F, that
// revalidation is C, and the first case holds. The argument needs:
//
//   - Fresh opens, never a kept descriptor: the check opens FENCE anew every
//     group; Seal and ReadOnly.Scan open every segment anew (a kept descriptor
//     returns its cached size and pages: TestStaleReaderMissesSyncedRecords).
//     Mount with close-to-open on (never nocto).
//   - An exact change attribute: the fence record overwrites FENCE in place,
//     same size. NFSv4 (ONTAP: 4.1) has one; on NFSv3 a same-size overwrite
//     within one mtime tick may go unnoticed.
//   - Lookups on the server: mount with lookupcache=positive (or none), so a
//     name another host created (a new segment, SEAL) is not hidden by a cached
//     negative entry. Listings may be stale: scans also follow the chain of
//     segments by name (a segment starts where the one before ends).
//   - COMMIT before serving: a record O wrote but never committed may be served
//     by S and vanish when S restarts. T commits every segment after reading it,
//     so what it read is stable before it is sealed or served, then re-reads the
//     last segment up to the end to check that nothing vanished in between. A
//     Linux client sends COMMIT only for its own unstable writes (for the whole
//     file, offset 0, count 0), so an fsync of a file it only read sends nothing:
//     Seal rewrites the segment header unchanged first, which gives it one.
//     ONTAP acknowledges writes once they are in NVRAM, so there the COMMIT
//     should cost little (to be confirmed on FSx).
//   - Late writes end nowhere: after F, O may still write a group (it learns of
//     the fence only at its next check) or have a WRITE in flight. Bytes past End
//     or in segments after LastSegment are never read from a sealed directory.
//     Bytes that reach S before T's scan are read, sealed and committed, and stay
//     readable (never acked, like a write a crash cut off: producers retry, and
//     idempotent producers are deduplicated). O never writes below its write
//     offset, nor anything after a failed write (see Group commit: the WAL
//     fails for good, so the late bytes of a failed group are the tail of the
//     last segment, sealed if they landed before T's scan, past End if not; no
//     later record shares their positions), and a fenced Replay refuses before
//     truncating. TestLateBytesOfAFailedWriteAreNeverRead and
//     TestLateBytesOfAFailedSync land such bytes before and after the next
//     group and the seal.
//   - Uncached reads of what decides an ack: FENCE, SEAL and the epoch fence
//     token are read with ReadUncached (O_DIRECT, so the READ goes to S). After
//     O's own WRITE of its owner record, the weak cache consistency attributes in
//     the reply can make O's client take T's later change for its own and keep a
//     stale page across a fresh open (TestFenceAndTokenReadUncachedAfterOwnWrite
//     models it with StaleFS.SetOwnWriteStale). Where the file system refuses
//     O_DIRECT (EINVAL: tmpfs on older kernels, some FUSE) the read falls back to
//     a plain fresh open; such a file system is not shared between hosts. The
//     owner's check after every group (checkFence) reads cached, with a fresh open,
//     only on the OS file system on a local file system with one page cache for
//     every reader (ext4, XFS, Btrfs, tmpfs, F2FS: sharedPageCache), where no page
//     can be stale and O_DIRECT would add a device read to every group commit.
//
// # The epoch fence
//
// A FENCE stops one directory, and only one the taker reaches. The broker's
// epoch fence token (epochfence.go; file FENCED-EPOCH in the broker's home,
// package wal/walhome) stops registration epochs by number: an owner that
// registered epoch N and stalled before creating epoch-N, a directory a stale
// listing hides, a directory the GC removed (and MkdirAll would recreate). With
// Config.EpochFence, Open does MkdirAll, writes the owner record into FENCE
// (synced), and only then reads the token, refusing (ErrFenced, and fencing the
// directory) an epoch it fences. The taker (walhome.SealUpTo) marks the token
// first, synced, then fences and seals every epoch up to N by name, creating
// what is missing. Either O's token read follows T's mark (O is refused), or O's
// owner record was written before T's by-name Fence of epoch-N, which writes the
// fence record into that same FENCE, so O's first group commit fails. The
// post-sync check therefore reads FENCE only: every later fence of an epoch
// whose Open succeeded fences its directory by name (or removes it, which makes
// the FENCE read fail: fenced).
//
// Errors fail safe: a check that cannot read FENCE counts as fenced (on a soft
// mount a timeout fails the WAL rather than acking). The fence is the first
// guard; the broker's lease is the second (docs/DESIGN.md, Leases).
//
// Cost of the check: one open, one 256-byte read and one close of FENCE per
// group commit, not per record. Measured on the development machine (ext4 on a
// virtio disk, 2 cores, other builds running, load 1-2.5): the check alone
// takes 4 us (BenchmarkFenceCheck); inside the commit loop it averaged 10-11 us
// (weir_wal_fence_check_duration_seconds over 5000 groups) against an
// fdatasync averaging 170-210 us. BenchmarkGroupCommitFence, 128-byte records
// (one appender: fence off and on alternated, five runs of 2 s each; 64
// appenders: four runs of each, off first):
//
//	appenders  records/group  groups/s, fence off        groups/s, fence on
//	1          1              4877-5540 (median 5132)    4249-5029 (median 4535)
//	64         31             4083-5952 (median 5027)    3350-4395 (median 4364)
//
// so 10-13% fewer group commits per second by the medians, with overlapping
// ranges; the check's own 10 us is 5% of a commit, and this loaded machine
// could not separate the rest from noise. On NFS the check is one to two round trips
// to the server per group (NFSv4 OPEN and CLOSE; a READ only when FENCE
// changed), not measured here: measure with BenchmarkGroupCommitFence on FSx.
// It does not grow with the records per group, and groups grow when the round
// trip is long, so the cost per record shrinks under load.
//
// # Fresh reads
//
// ReadOnly.Scan opens every segment afresh each time, so a reader that scans
// again after the owner synced more records sees them. ReadOnly.ReadAt keeps
// descriptors open to stay cheap; the bytes it returns are trusted only below a
// bound from a Scan of the same ReadOnly (whose fresh opens revalidated the
// client's cache of those files) or from the seal (a ReadOnly that finds SEAL
// reopens its descriptors). A position learnt elsewhere (from the owner) needs a
// Scan first. ReadAt reads only segments the ReadOnly opened from a listing, from
// a Scan (which finds unlisted ones by name) or, sealed, the seal's last segment by
// name: a stale listing must not make it read a position of an unknown segment
// from the file of the one before (TestStaleListingReadAtUsesTheRightSegment).
// waltest.StaleFS models one NFS client's cache for tests.
//
// # Recovery
//
// Open lists the segments; Replay reads them in order and calls back for each
// valid record. A torn or corrupt record (or segment header) in the last
// segment is a torn tail: a write a crash cut short, never acked. Replay stops
// there, truncates that segment after its last valid record and starts a new
// segment at the cut, so new appends never follow garbage. Replay also starts
// a new segment after a clean end, truncating the previous one's unused
// preallocated space.
//
// In a segment followed by another, records must run exactly to where the next
// one starts (its base): the next segment is created only after every record
// before it was synced. A bad record or header there, or records ending early,
// is corruption of synced and perhaps acked data, not a torn tail. Replay
// refuses it with an error wrapping ErrCorrupt that names the segment file and
// offset, and leaves every file as it was; cutting there would delete every
// later segment. Config.AcceptCorruption is the operator's decision to accept
// that loss: Replay then cuts there as for a torn tail, removes the later
// segments and logs at error level (ReplayInfo.Corruption). ReadOnly.Scan and
// Seal apply the same rule: corruption before the last segment is an error,
// never an end.
//
// A segment header with a valid checksum but another version is not damage: it
// was written by another build. Replay (and ReadOnly.Scan) refuse it with
// ErrVersion, naming the file, and leave the log untouched.
//
// # Golden files
//
// testdata/segments-v1/ holds two segments of format version 1 (a few records,
// preallocated zero tails), testdata/fence-v1.bin a FENCE (owner record and
// fence record) and testdata/seal-v1.bin a SEAL of those segments. TestGolden*
// read them with this build and check that it still writes them byte for byte. A format change bumps FormatVersion and
// adds testdata/segments-v<N>/ with
//
//	go test ./wal/ -run Golden -update
//
// which writes the current version's directory only; older ones are never
// regenerated and must still be read or refused with ErrVersion. FENCE and SEAL
// have versions of their own (FenceFormatVersion, SealFormatVersion).
package wal
