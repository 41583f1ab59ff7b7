package nfsfs

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// Errnos are the errors the control interface injects by name.
var Errnos = map[string]syscall.Errno{"EIO": syscall.EIO, "ENOSPC": syscall.ENOSPC, "ESTALE": syscall.ESTALE, "EDQUOT": syscall.EDQUOT}

// Handler is the model's control interface, for processes that do not hold the Model
// (weir chaos, scripts):
//
//	POST /freeze[?for=30s]          freeze all I/O (thaw after for, if given)
//	POST /thaw
//	POST /fail?ops=write,commit&errno=EIO   (errno=none clears those classes)
//	POST /slow?mount=broker-1&extra=50ms    (extra=0 clears)
//	POST /profile?name=fsx|local
//	POST /clear                     every fault off
//	GET  /stats                     frozen, profile, COMMIT p50/p99/p99.9
func (m *Model) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /freeze", func(w http.ResponseWriter, r *http.Request) {
		m.Freeze()
		if s := r.URL.Query().Get("for"); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			time.AfterFunc(d, m.Thaw)
		}
	})
	mux.HandleFunc("POST /thaw", func(http.ResponseWriter, *http.Request) { m.Thaw() })
	mux.HandleFunc("POST /clear", func(http.ResponseWriter, *http.Request) { m.Clear() })
	mux.HandleFunc("POST /fail", func(w http.ResponseWriter, r *http.Request) {
		ops, ok := ParseOps(r.URL.Query().Get("ops"))
		name := strings.ToUpper(r.URL.Query().Get("errno"))
		e, known := Errnos[name]
		if !ok || (!known && name != "NONE") {
			http.Error(w, "nfsfs: want ops=meta,read,write,commit|all and errno=EIO|ENOSPC|ESTALE|EDQUOT|none", http.StatusBadRequest)
			return
		}
		m.Fail(ops, e)
	})
	mux.HandleFunc("POST /slow", func(w http.ResponseWriter, r *http.Request) {
		d, err := time.ParseDuration(r.URL.Query().Get("extra"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		m.Slow(r.URL.Query().Get("mount"), d)
	})
	mux.HandleFunc("POST /profile", func(w http.ResponseWriter, r *http.Request) {
		p, ok := ProfileByName(r.URL.Query().Get("name"))
		if !ok {
			http.Error(w, "nfsfs: unknown profile", http.StatusBadRequest)
			return
		}
		m.SetProfile(p)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		q, n := m.CommitStats(0.5, 0.99, 0.999)
		json.NewEncoder(w).Encode(map[string]any{
			"frozen": m.Frozen(), "profile": m.Profile().Name, "commits": n,
			"commit_p50": q[0].String(), "commit_p99": q[1].String(), "commit_p999": q[2].String(),
		})
	})
	return mux
}

// String describes the profile.
func (p Profile) String() string {
	return fmt.Sprintf("%s (meta %v/%v, read %v/%v, write %v/%v, commit %v/%v p50/p99, %d MiB/s)", p.Name,
		p.Meta.P50, p.Meta.P99, p.Read.P50, p.Read.P99, p.Write.P50, p.Write.P99, p.Commit.P50, p.Commit.P99, p.Throughput>>20)
}
