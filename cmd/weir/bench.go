package main

import (
	"context"
	"os"

	"github.com/weir-io/weir/bench"
)

func runBench(ctx context.Context, args []string) error {
	return bench.Main(ctx, args, os.Stdout, os.Stderr)
}
