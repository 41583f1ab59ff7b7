package storetest

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/weir-io/weir/objectstore"
)

// Throughput is the result of MeasureGet.
type Throughput struct {
	Bytes    int64
	Requests int
	Elapsed  time.Duration
}

// MBps returns megabytes (10^6 bytes) per second.
func (t Throughput) MBps() float64 {
	if t.Elapsed <= 0 {
		return 0
	}
	return float64(t.Bytes) / 1e6 / t.Elapsed.Seconds()
}

func (t Throughput) String() string {
	return fmt.Sprintf("%.0f MB/s (%d MiB in %d GETs, %s)", t.MBps(), t.Bytes>>20, t.Requests, t.Elapsed.Round(time.Millisecond))
}

// MeasureGet reads the object key (size bytes) rounds times, each time as consecutive
// ranged GETs of rangeSize bytes, with up to parallel GETs in flight, and reports the
// raw GET throughput: the reference that cold reads through Weir's read path (index,
// block cache, readahead) are compared with. The bytes are discarded.
func MeasureGet(ctx context.Context, s objectstore.Store, key string, size, rangeSize int64, parallel, rounds int) (Throughput, error) {
	if rangeSize <= 0 || parallel <= 0 || rounds <= 0 {
		return Throughput{}, fmt.Errorf("storetest: bad MeasureGet arguments")
	}
	type job struct{ off, n int64 }
	var jobs []job
	for r := 0; r < rounds; r++ {
		for off := int64(0); off < size; off += rangeSize {
			jobs = append(jobs, job{off, min(rangeSize, size-off)})
		}
	}
	ch := make(chan job)
	var (
		mu    sync.Mutex
		total int64
		first error
		wg    sync.WaitGroup
	)
	start := time.Now()
	for w := 0; w < parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for j := range ch {
				n, err := getDiscard(ctx, s, key, j.off, j.n, buf)
				mu.Lock()
				total += n
				if err != nil && first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	for _, j := range jobs {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			break
		}
		ch <- j
	}
	close(ch)
	wg.Wait()
	t := Throughput{Bytes: total, Requests: len(jobs), Elapsed: time.Since(start)}
	if first != nil {
		return t, first
	}
	if want := size * int64(rounds); total != want {
		return t, fmt.Errorf("storetest: read %d bytes, want %d", total, want)
	}
	return t, nil
}

// getDiscard reads a range into buf, over and over (as a read path filling a block
// buffer would), and returns the bytes read.
func getDiscard(ctx context.Context, s objectstore.Store, key string, off, n int64, buf []byte) (int64, error) {
	rc, err := s.GetRange(ctx, key, off, n)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	var total int64
	for {
		m, err := rc.Read(buf)
		total += int64(m)
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}
