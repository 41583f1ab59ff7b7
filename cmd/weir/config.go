package main

import (
	"context"
	"errors"
	"io"
)

func runConfig(ctx context.Context, args []string, w io.Writer) error {
	return errors.New("weir config: not built yet")
}
