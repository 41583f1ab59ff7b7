package objectstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weir-io/weir/objectstore"
)

func TestValidateKey(t *testing.T) {
	for _, k := range []string{"a", "a/b/c", "objects/0000000000000042.obj", "x-y_z.w=v,u@t~s!r*q'p(o)n", "..a", "a..", "a/.b", strings.Repeat("k", 1024)} {
		if err := objectstore.ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q): %v", k, err)
		}
	}
	for _, k := range []string{"", "/a", "a/", "a//b", ".", "..", "a/../b", "a/./b", "a b", "a\\b", "a?b", "a%2F", "é", strings.Repeat("k", 1025)} {
		if err := objectstore.ValidateKey(k); !errors.Is(err, objectstore.ErrInvalidKey) {
			t.Errorf("ValidateKey(%q) = %v", k, err)
		}
	}
	for _, p := range []string{"", "a", "a/", "a/b", "a/b/", "a/.", "a/.."} {
		if err := objectstore.ValidatePrefix(p); err != nil {
			t.Errorf("ValidatePrefix(%q): %v", p, err)
		}
	}
	for _, p := range []string{"/", "//", "a//", "../", "a/../", "./x", "a b"} {
		if err := objectstore.ValidatePrefix(p); !errors.Is(err, objectstore.ErrInvalidKey) {
			t.Errorf("ValidatePrefix(%q) = %v", p, err)
		}
	}
}

func TestClipRange(t *testing.T) {
	for _, c := range []struct {
		off, n, size, want int64
		bad                bool
	}{
		{0, -1, 10, 10, false}, {0, 5, 10, 5, false}, {5, 10, 10, 5, false}, {10, -1, 10, 0, false},
		{10, 3, 10, 0, false}, {0, -1, 0, 0, false}, {3, 0, 10, 0, false},
		{11, -1, 10, 0, true}, {-1, 1, 10, 0, true}, {0, -2, 10, 0, true}, {1, -1, 0, 0, true},
	} {
		got, err := objectstore.ClipRange(c.off, c.n, c.size)
		if c.bad != errors.Is(err, objectstore.ErrInvalidRange) || !c.bad && got != c.want {
			t.Errorf("ClipRange(%d, %d, %d) = %d, %v", c.off, c.n, c.size, got, err)
		}
	}
}

func TestOutcome(t *testing.T) {
	for err, want := range map[error]string{
		nil:                                           "ok",
		objectstore.ErrNotFound:                       "not_found",
		objectstore.ErrThrottled:                      "throttled",
		objectstore.ErrUnavailable:                    "unavailable",
		objectstore.ErrInvalidRange:                   "invalid_range",
		objectstore.ErrInvalidKey:                     "invalid_key",
		context.Canceled:                              "canceled",
		context.DeadlineExceeded:                      "canceled",
		errors.New("access denied"):                   "error",
		fmt.Errorf("x: %w", objectstore.ErrThrottled): "throttled",
		// The context wins: Retrying's error after the context ended wraps both.
		fmt.Errorf("%w (after 3 attempts: %w)", context.Canceled, objectstore.ErrUnavailable): "canceled",
	} {
		if got := objectstore.Outcome(err); got != want {
			t.Errorf("Outcome(%v) = %s, want %s", err, got, want)
		}
	}
	if !objectstore.IsTransient(fmt.Errorf("x: %w", objectstore.ErrUnavailable)) || objectstore.IsTransient(objectstore.ErrNotFound) {
		t.Error("IsTransient")
	}
}
