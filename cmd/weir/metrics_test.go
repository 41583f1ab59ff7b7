package main

import (
	"flag"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPprofFlag: --pprof serves the profiles on the metrics listener beside /metrics;
// without it they are not there.
func TestPprofFlag(t *testing.T) {
	for _, on := range []bool{false, true} {
		addr := freeAddr(t)
		fs := flag.NewFlagSet("weir test", flag.ContinueOnError)
		p := newProcess(fs, "error", addr, "")
		args := []string{}
		if on {
			args = append(args, "--pprof")
		}
		if ok, err := p.parse(fs, args); !ok || err != nil {
			t.Fatalf("parse: %v %v", ok, err)
		}
		if code, body := get(t, "http://"+addr+"/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
			t.Fatalf("/metrics: %d", code)
		}
		code, body := get(t, "http://"+addr+"/debug/pprof/goroutine?debug=1")
		if on && (code != 200 || !strings.Contains(body, "goroutine profile")) {
			t.Errorf("--pprof: goroutine profile: %d %.100q", code, body)
		}
		if !on && code != http.StatusNotFound {
			t.Errorf("without --pprof: /debug/pprof answered %d", code)
		}
		if on {
			if code, body := get(t, "http://"+addr+"/debug/pprof/"); code != 200 || !strings.Contains(body, "mutex") {
				t.Errorf("--pprof: index: %d", code)
			}
		}
		p.stop()
	}
}

// TestPprofNeedsMetrics: profiles without a listener to serve them is a usage error,
// not a silently ignored flag.
func TestPprofNeedsMetrics(t *testing.T) {
	fs := flag.NewFlagSet("weir test", flag.ContinueOnError)
	p := newProcess(fs, "error", "", "")
	if _, err := p.parse(fs, []string{"--pprof"}); err == nil || !strings.Contains(err.Error(), "--metrics") {
		t.Fatalf("want an error naming --metrics, got %v", err)
	}
}
