package main

import (
	"context"
	"errors"
	"io"
)

func runGroup(ctx context.Context, args []string, w io.Writer) error {
	return errors.New("weir group: not built yet")
}
