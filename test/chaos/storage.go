package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"
)

// storageControl flips faults of the lab's file system through its control interface
// (nfsfs.Model.Handler): in process for an own cluster, over HTTP when attached.
type storageControl struct {
	h    http.Handler // own cluster
	base string       // attached: the handler's base URL
}

// post sends one control request, e.g. post("fail", "ops", "write,commit", "errno", "EIO").
func (s storageControl) post(action string, kv ...string) error {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	path := "/" + action + "?" + q.Encode()
	if s.h != nil {
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, nil))
		if rec.Code != http.StatusOK {
			return fmt.Errorf("chaos: storage %s: %s", action, strings.TrimSpace(rec.Body.String()))
		}
		return nil
	}
	resp, err := http.Post(strings.TrimRight(s.base, "/")+path, "", nil)
	if err != nil {
		return fmt.Errorf("chaos: storage %s: %w", action, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("chaos: storage %s: %s", action, strings.TrimSpace(string(b)))
	}
	return nil
}

// storageTarget is a target whose WAL root is the lab's file system.
type storageTarget interface {
	Storage() (storageControl, bool)
}

func (t procTarget) Storage() (storageControl, bool) {
	if m := t.c.FSx(); m != nil {
		return storageControl{h: m.Handler()}, true
	}
	return storageControl{}, false
}

func (t cmdTarget) Storage() (storageControl, bool) {
	return storageControl{base: t.cfg.FSxControl}, t.cfg.FSxControl != ""
}

// runStorageFault runs storage-freeze, storage-slow (on broker victim's mount) or
// storage-error for cfg.StorageFor, then ends it.
func runStorageFault(ctx context.Context, cfg Config, t target, f Fault, victim int32, ev *Event, wait func(time.Duration) bool) error {
	st, ok := t.(storageTarget)
	var sc storageControl
	if ok {
		sc, ok = st.Storage()
	}
	if !ok {
		return errors.New("chaos: storage faults need the lab file system (--fsx, or --fsx-control when attached)")
	}
	start, end := []string{"freeze"}, []string{"thaw"}
	switch f.Kind {
	case StorageSlow:
		mount := fmt.Sprintf("broker-%d", victim) // proccluster's mount names
		ev.Brokers = []int32{victim}
		start = []string{"slow", "mount", mount, "extra", cfg.SlowBy.String()}
		end = []string{"slow", "mount", mount, "extra", "0s"}
	case StorageError:
		start = []string{"fail", "ops", "write,commit", "errno", f.Arg}
		end = []string{"fail", "ops", "write,commit", "errno", "none"}
	}
	ev.Steps = append(ev.Steps, EventStep{victim, time.Now()})
	if err := sc.post(start[0], start[1:]...); err != nil {
		return err
	}
	wait(cfg.StorageFor)
	// Always undone, also when the run is cancelled: a frozen file system would hold
	// every broker (and the cluster's shutdown).
	return sc.post(end[0], end[1:]...)
}
