package wal

// NoZeroFill makes preallocation use fallocate only (for benchmarks).
func NoZeroFill(c *Config) { c.noZeroFill = true }
