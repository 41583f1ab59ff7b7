package crc32c

import "testing"

// The check value of CRC-32C (Castagnoli) for "123456789".
func TestCheckValue(t *testing.T) {
	if got := Checksum([]byte("123456789")); got != 0xE3069283 {
		t.Fatalf("crc32c(123456789) = %08x", got)
	}
	if got := Update(Update(0, []byte("1234")), []byte("56789")); got != 0xE3069283 {
		t.Fatalf("incremental = %08x", got)
	}
}
