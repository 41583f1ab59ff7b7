package main

import (
	"context"
	"errors"
	"io"
)

func runTopic(ctx context.Context, args []string, w io.Writer) error {
	return errors.New("weir topic: not built yet")
}
