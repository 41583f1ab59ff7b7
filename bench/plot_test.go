package bench

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func decodePNG(t *testing.T, data []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 500 {
		t.Fatalf("image is only %v", b)
	}
	// Something was drawn: not every pixel is the background.
	first := img.At(0, 0)
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			if img.At(x, y) != first {
				return
			}
		}
	}
	t.Fatal("blank image")
}

func TestWritePlotLatency(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.png")
	if err := WritePlot(path, sampleResult(t)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	decodePNG(t, data)
}

func TestRenderPlotThroughputOnly(t *testing.T) {
	begin := time.Now()
	r := newRecorder(false, begin)
	var ivs []Interval
	for i := 1; i <= 4; i++ {
		r.observeBatch(100*i, int64(100000*i), nil, begin.Add(time.Duration(i)*time.Second))
		ivs = append(ivs, r.snapshot(begin.Add(time.Duration(i)*time.Second)))
	}
	res := &Result{Mode: "consume", Settings: map[string]string{"topic": "t"}, Consume: &ConsumeResult{RecordsRead: 1000, Intervals: ivs}}
	var buf bytes.Buffer
	if err := RenderPlot(&buf, res); err != nil {
		t.Fatal(err)
	}
	decodePNG(t, buf.Bytes())
}

// A run stopped before anything was measured still gets a valid picture.
func TestRenderPlotEmpty(t *testing.T) {
	for _, res := range []*Result{
		{Mode: "produce", Produce: &ProduceResult{Intervals: []Interval{}}},
		{Mode: "consume", Consume: &ConsumeResult{Intervals: []Interval{}}},
		{Mode: "produce", Produce: &ProduceResult{Latency: &LatencySummary{}, Intervals: []Interval{}}},
		// Latency known but no interval finished: distribution only.
		{Mode: "produce", Produce: &ProduceResult{Latency: &LatencySummary{Count: 1, P50: 1, Max: 1},
			Distribution: []PercentilePoint{{0, 1}, {100, 1}}, Intervals: []Interval{}}},
	} {
		var buf bytes.Buffer
		if err := RenderPlot(&buf, res); err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(&buf); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPercentileAxis(t *testing.T) {
	if x := percentileX(99, 10); x < 99.99 || x > 100.01 {
		t.Errorf("x(99%%) = %v", x)
	}
	if x := percentileX(100, 5000); x != 5000 {
		t.Errorf("x(max) = %v", x)
	}
	labels := map[string]bool{}
	for _, tk := range percentileTicks(1, 1e4) {
		labels[tk.Label] = true
	}
	for _, want := range []string{"0%", "50%", "90%", "99%", "99.9%", "99.99%"} {
		if !labels[want] {
			t.Errorf("no tick %s in %v", want, labels)
		}
	}
}
