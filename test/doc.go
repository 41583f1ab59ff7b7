// Package test holds Weir's process-level tests: they build the weir binary, run it as
// users do, kill it with SIGKILL, and check with real clients (franz-go, kcat) that
// nothing acked was lost.
package test
