package main

import (
	"runtime"
	"testing"
)

func TestSetProcs(t *testing.T) {
	orig := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(orig)
	t.Setenv("GOMAXPROCS", "")
	runtime.GOMAXPROCS(2)
	setProcs(0)
	if got := runtime.GOMAXPROCS(0); got != minProcs {
		t.Fatalf("automatic on 2 Ps: %d, want %d", got, minProcs)
	}
	runtime.GOMAXPROCS(8)
	setProcs(0)
	if got := runtime.GOMAXPROCS(0); got != 8 {
		t.Fatalf("automatic lowered 8 Ps to %d", got)
	}
	setProcs(3)
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Fatalf("--gomaxprocs 3 gave %d", got)
	}
	t.Setenv("GOMAXPROCS", "2")
	runtime.GOMAXPROCS(2)
	setProcs(0)
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("the environment's GOMAXPROCS=2 was overridden: %d", got)
	}
}
