package ctlclient

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/weir-io/weir/metadata"
)

// startWait is NewClient's wait for a first View: each controller's last failure
// (reach.go), whether waiting can still help, progress for the operator, and the final
// error. It used to wait StartTimeout in silence and end with "context deadline
// exceeded"; a wrong port or a missing --controller-tls-ca now shows at once.
//
// NewClient gives up before StartTimeout once every controller failed permanently
// (TLS, CA, credentials, not a controller) or, after ClientConfig.DownGrace, had
// nothing listening. A broker (DownGrace 0) waits for controllers that are not up yet;
// `weir admin` gives them a few seconds (a controller restarting is common).
type startWait struct {
	addrs []string
	grace time.Duration
	log   *slog.Logger
	start time.Time

	mu   sync.Mutex
	last []*ControllerError // per controller; nil: not failed (yet)
}

func newStartWait(addrs []string, grace time.Duration, log *slog.Logger) *startWait {
	return &startWait{addrs: addrs, grace: grace, log: log, start: time.Now(), last: make([]*ControllerError, len(addrs))}
}

// record stores controller idx's failure; a failure that differs from its last one is
// logged (once, however long it lasts).
func (w *startWait) record(idx int, e *ControllerError) {
	w.mu.Lock()
	prev := w.last[idx]
	w.last[idx] = e
	summary := w.summaryLocked()
	w.mu.Unlock()
	if prev == nil || prev.msg != e.msg {
		waited := time.Since(w.start).Round(time.Second)
		w.log.Warn(fmt.Sprintf("waiting for controllers: %s (%v)", summary, waited), "waited", waited)
	}
}

// summary is every failed controller's last failure.
func (w *startWait) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.summaryLocked()
}

func (w *startWait) summaryLocked() string {
	var parts []string
	for _, e := range w.last {
		if e != nil {
			parts = append(parts, e.msg)
		}
	}
	return strings.Join(parts, "; ")
}

// hopeless reports whether every controller failed, each in a way waiting cannot fix.
func (w *startWait) hopeless() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	graceOver := w.grace > 0 && time.Since(w.start) >= w.grace
	for _, e := range w.last {
		if e == nil || e.class == transient || (e.class == down && !graceOver) {
			return false
		}
	}
	return true
}

// tried reports whether controller idx failed at least once.
func (w *startWait) tried(idx int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[idx] != nil
}

// err is the final error: every controller's last failure.
func (w *startWait) err(gaveUp bool, timeout time.Duration) *StartError {
	w.mu.Lock()
	defer w.mu.Unlock()
	se := &StartError{Waited: time.Since(w.start), GaveUp: gaveUp, Timeout: timeout}
	for i, e := range w.last {
		if e == nil {
			e = ctlErr(w.addrs[i], ErrTimeout, context.DeadlineExceeded, transient, "%s not tried: the others took the whole %v", w.addrs[i], timeout)
		}
		se.Errs = append(se.Errs, e)
	}
	return se
}

// report calls fn every interval with the wait's summary until the returned stop is
// called.
func (w *startWait) report(fn func(waited time.Duration, status string), interval time.Duration) (stop func()) {
	if fn == nil || interval <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				w.mu.Lock()
				any := false
				for _, e := range w.last {
					any = any || e != nil
				}
				w.mu.Unlock()
				if any {
					fn(time.Since(w.start), w.summary())
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// StartError is NewClient's failure to take a first View from any controller: each
// controller's last failure, in ClientConfig.Controllers order. It matches
// ErrNoController, metadata.ErrNotController and the sentinels of each failure
// (ErrRefused, ctlwire.ErrUnauthenticated, ...).
type StartError struct {
	Errs []*ControllerError
	// Waited is how long NewClient tried; GaveUp: it stopped before Timeout (its
	// StartTimeout) because every controller failed in a way waiting cannot fix.
	Waited  time.Duration
	GaveUp  bool
	Timeout time.Duration
}

func (e *StartError) Error() string {
	var b strings.Builder
	if e.GaveUp {
		fmt.Fprintf(&b, "controller client: no controller usable (gave up after %v)", roundWait(e.Waited))
	} else {
		fmt.Fprintf(&b, "controller client: no controller answered within %v", e.Timeout)
	}
	for i, ce := range e.Errs {
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		b.WriteString(sep + ce.msg)
	}
	return b.String()
}

func (e *StartError) Unwrap() []error {
	errs := []error{ErrNoController, metadata.ErrNotController}
	for _, ce := range e.Errs {
		errs = append(errs, ce)
	}
	return errs
}

// roundWait rounds a wait for people: milliseconds below a second, tenths above.
func roundWait(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}
