package testutil

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeT records a Fatalf and ends its goroutine like testing.T does, so a failing wait
// can be observed without failing this test.
type fakeT struct {
	testing.TB
	failed chan string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed <- fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls wait on a fakeT in its own goroutine and returns the failure message, or
// "" if wait returned.
func run(wait func(testing.TB)) string {
	f := &fakeT{failed: make(chan string, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait(f)
	}()
	<-done
	select {
	case msg := <-f.failed:
		return msg
	default:
		return ""
	}
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	msg := run(func(tb testing.TB) {
		Eventually(tb, 10*time.Second, "the third call", func() bool { return calls.Add(1) >= 3 })
	})
	if msg != "" || calls.Load() != 3 {
		t.Fatalf("failure %q after %d calls, want success on the third", msg, calls.Load())
	}
}

func TestEventuallyReportsWhatAndElapsed(t *testing.T) {
	start := time.Now()
	msg := run(func(tb testing.TB) {
		Eventually(tb, 50*time.Millisecond, "pigs to fly", func() bool { return false })
	})
	if time.Since(start) < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before the timeout", time.Since(start))
	}
	if !strings.Contains(msg, "pigs to fly") || !strings.Contains(msg, "timed out after") || strings.Contains(msg, "last error") {
		t.Fatalf("failure message %q", msg)
	}
}

func TestEventuallyChecksOnceMoreAtTheDeadline(t *testing.T) {
	start := time.Now()
	msg := run(func(tb testing.TB) {
		Eventually(tb, 30*time.Millisecond, "the deadline", func() bool { return time.Since(start) >= 30*time.Millisecond })
	})
	if msg != "" {
		t.Fatalf("a condition true at the deadline failed: %q", msg)
	}
}

func TestEventuallyNoErrorReportsTheLastError(t *testing.T) {
	var n atomic.Int32
	msg := run(func(tb testing.TB) {
		EventuallyNoError(tb, 30*time.Millisecond, "the port", func() error {
			return fmt.Errorf("attempt %d: %w", n.Add(1), errors.ErrUnsupported)
		})
	})
	if want := fmt.Sprintf("attempt %d", n.Load()); !strings.Contains(msg, "the port") || !strings.Contains(msg, want) {
		t.Fatalf("failure message %q, want the last error (%s)", msg, want)
	}
}
