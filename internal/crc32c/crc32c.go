// Package crc32c is the one CRC32C (Castagnoli) table of the tree. Kafka's record batches,
// Weir's WAL records and segment headers, and the object format all use CRC32C; they share
// this table so there is one definition of the polynomial and the hardware path.
package crc32c

import "hash/crc32"

// Table is the Castagnoli table (hash/crc32 uses SSE4.2/ARMv8 instructions for it).
var Table = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC32C of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, Table) }

// Update continues crc over b.
func Update(crc uint32, b []byte) uint32 { return crc32.Update(crc, Table, b) }
