package wal

import "unsafe"

// addrOf is the address of b's first element (for O_DIRECT alignment only).
func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
