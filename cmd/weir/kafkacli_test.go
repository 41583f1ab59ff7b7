package main

import (
	"flag"
	"io"
	"slices"
	"testing"
)

func TestParseFlagsInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []string
		n    int
	}{
		{[]string{"orders", "--partitions", "6"}, []string{"orders"}, 6},
		{[]string{"--partitions", "6", "a", "b"}, []string{"a", "b"}, 6},
		{[]string{"a", "--partitions=2", "b"}, []string{"a", "b"}, 2},
		{[]string{"a", "--", "--partitions", "b"}, []string{"a", "--partitions", "b"}, 1},
		{nil, nil, 1},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		n := fs.Int("partitions", 1, "")
		pos, help, err := parseFlags(fs, tc.args)
		if err != nil || help || !slices.Equal(pos, tc.pos) || *n != tc.n {
			t.Errorf("%q: positional %q partitions %d help %v err %v; want %q %d", tc.args, pos, *n, help, err, tc.pos, tc.n)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, help, err := parseFlags(fs, []string{"x", "--help"}); !help || err != nil {
		t.Errorf("--help after a positional: help %v err %v", help, err)
	}
	if _, _, err := parseFlags(fs, []string{"x", "--nope"}); err == nil {
		t.Error("an unknown flag after a positional was accepted")
	}
}
