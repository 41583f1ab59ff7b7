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
// recovery.
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
// # Group commit
//
// Append queues an entry (blocking only when QueueDepth entries are queued).
// One committer goroutine takes all queued entries up to MaxGroupBytes that
// fit in the active segment, calls their Prepare hooks in order, copies them
// into one buffer, writes it with one WriteAt, syncs with one fdatasync and
// calls the Done callbacks in order. Only then does it take the next group, so
// a group's failure is reported before any later entry is prepared.
//
// A failed write fails the group (ErrNoSpace for ENOSPC, ErrIO for other I/O
// errors) without moving the write position; the next group starts a new
// segment so that the failed group's bytes can never be mistaken for records. A failed fdatasync fails
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
// # Recovery
//
// Open lists the segments; Replay reads them in order and calls back for each
// valid record. At the first torn or corrupt record (or segment header) it
// stops, truncates that segment after its last valid record, removes the
// later segments (logging their names) and starts a new segment at the cut,
// so new appends never follow garbage. Replay also starts a new segment after
// a clean end, truncating the previous one's unused preallocated space.
//
// A segment header with a valid checksum but another version is not damage: it
// was written by another build. Replay (and ReadOnly.Scan) refuse it with
// ErrVersion, naming the file, and leave the log untouched.
//
// # Golden files
//
// testdata/segments-v1/ holds two segments of format version 1 (a few records,
// preallocated zero tails). TestGolden* read them with this build and check that
// it still writes them byte for byte. A format change bumps FormatVersion and
// adds testdata/segments-v<N>/ with
//
//	go test ./wal/ -run Golden -update
//
// which writes the current version's directory only; older ones are never
// regenerated and must still be read or refused with ErrVersion.
package wal
