package objectstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Instrumented wraps a Store and records every call on an injected Registerer (never
// the global one). Put it inside Retrying so each attempt is counted:
//
//	weir_objectstore_requests_total{op,outcome}       counter; op = put|get|head|delete|list,
//	                                                  outcome = objectstore.Outcome(err)
//	weir_objectstore_request_duration_seconds{op}     histogram; a get runs until its
//	                                                  reader is closed (or fails), so it
//	                                                  covers the transfer
//	weir_objectstore_bytes_total{direction}           counter; direction = upload (successful put
//	                                                  bodies) | download (get bodies read)
//
// A List is one operation whatever the number of pages it took. Unregister removes the
// metrics so another Instrumented can use the same Registerer.
type Instrumented struct {
	inner Store
	m     *storeMetrics
}

var _ Store = (*Instrumented)(nil)

type storeMetrics struct {
	reg      prometheus.Registerer
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	bytes    *prometheus.CounterVec
}

// NewInstrumented wraps inner. A nil reg records nothing. It fails if the metrics are
// already registered on reg (one Instrumented per Registerer at a time).
func NewInstrumented(inner Store, reg prometheus.Registerer) (*Instrumented, error) {
	in := &Instrumented{inner: inner}
	if reg == nil {
		return in, nil
	}
	m := &storeMetrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_objectstore_requests_total",
			Help: "Object store operations by type and outcome (every attempt counts: retries are separate requests).",
		}, []string{"op", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "weir_objectstore_request_duration_seconds",
			Help:    "Object store operation latency by type; a get lasts until its body is read and closed.",
			Buckets: prometheus.ExponentialBucketsRange(0.5e-3, 60, 18),
		}, []string{"op"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "weir_objectstore_bytes_total",
			Help: "Object bytes moved: upload (bodies of successful puts) and download (get bodies read).",
		}, []string{"direction"}),
	}
	cs := []prometheus.Collector{m.requests, m.duration, m.bytes}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, r := range cs[:i] {
				reg.Unregister(r)
			}
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("objectstore: metrics already registered (one Instrumented per Registerer): %w", err)
			}
			return nil, fmt.Errorf("objectstore: registering metrics: %w", err)
		}
	}
	// Make the series visible from the start, so dashboards and rate() see zeros.
	for _, op := range []string{"put", "get", "head", "delete", "list"} {
		m.duration.WithLabelValues(op)
		m.requests.WithLabelValues(op, "ok")
	}
	m.bytes.WithLabelValues("upload")
	m.bytes.WithLabelValues("download")
	in.m = m
	return in, nil
}

// Unregister removes the metrics from the Registerer.
func (in *Instrumented) Unregister() {
	if in.m == nil {
		return
	}
	in.m.reg.Unregister(in.m.requests)
	in.m.reg.Unregister(in.m.duration)
	in.m.reg.Unregister(in.m.bytes)
}

// Unwrap returns the wrapped store.
func (in *Instrumented) Unwrap() Store { return in.inner }

func (in *Instrumented) observe(op string, start time.Time, err error) {
	if in.m == nil {
		return
	}
	in.m.requests.WithLabelValues(op, Outcome(err)).Inc()
	in.m.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

func (in *Instrumented) addBytes(direction string, n int64) {
	if in.m == nil || n <= 0 {
		return
	}
	in.m.bytes.WithLabelValues(direction).Add(float64(n))
}

// Put implements Store. Uploaded bytes are counted when the put succeeds.
func (in *Instrumented) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	start := time.Now()
	err := in.inner.Put(ctx, key, body, size)
	in.observe("put", start, err)
	if err == nil {
		in.addBytes("upload", size)
	}
	return err
}

// GetRange implements Store.
func (in *Instrumented) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	start := time.Now()
	rc, err := in.inner.GetRange(ctx, key, offset, length)
	if err != nil {
		in.observe("get", start, err)
		return nil, err
	}
	return &countingReader{in: in, rc: rc, start: start}, nil
}

// countingReader counts downloaded bytes and records the get when the body ends in an
// error or is closed.
type countingReader struct {
	in    *Instrumented
	rc    io.ReadCloser
	start time.Time

	once sync.Once
	err  error // first read error other than EOF
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.rc.Read(p)
	c.in.addBytes("download", int64(n))
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}

func (c *countingReader) Close() error {
	err := c.rc.Close()
	c.once.Do(func() { c.in.observe("get", c.start, c.err) })
	return err
}

// Head implements Store.
func (in *Instrumented) Head(ctx context.Context, key string) (ObjectInfo, error) {
	start := time.Now()
	info, err := in.inner.Head(ctx, key)
	in.observe("head", start, err)
	return info, err
}

// Delete implements Store.
func (in *Instrumented) Delete(ctx context.Context, key string) error {
	start := time.Now()
	err := in.inner.Delete(ctx, key)
	in.observe("delete", start, err)
	return err
}

// List implements Store.
func (in *Instrumented) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	start := time.Now()
	out, err := in.inner.List(ctx, prefix)
	in.observe("list", start, err)
	return out, err
}
