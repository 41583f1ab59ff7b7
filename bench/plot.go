package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// WritePlot draws res to a PNG file: latency p50/p99 per interval on top and
// the latency percentile distribution below. A run without latency (plain
// consume) gets records/s and MB/s per interval instead.
func WritePlot(path string, res *Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := RenderPlot(f, res); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// latencySeries is one latency stream of a result, for plotting.
type latencySeries struct {
	name      string
	count     int64
	intervals []Interval
	dist      []PercentilePoint
}

func latencyStreams(res *Result) []latencySeries {
	var out []latencySeries
	if p := res.Produce; p != nil && p.Latency != nil && p.Latency.Count > 0 {
		out = append(out, latencySeries{"ack", p.Latency.Count, p.Intervals, p.Distribution})
	}
	if c := res.Consume; c != nil && c.Latency != nil && c.Latency.Count > 0 {
		out = append(out, latencySeries{"e2e", c.Latency.Count, c.Intervals, c.Distribution})
	}
	return out
}

// RenderPlot writes the PNG of WritePlot to w.
func RenderPlot(w io.Writer, res *Result) error {
	var top, bottom *plot.Plot
	var err error
	if streams := latencyStreams(res); len(streams) > 0 {
		top, err = latencyOverTime(streams)
		if err == nil {
			bottom, err = latencyDistribution(streams)
		}
	} else {
		top, bottom, err = throughputOverTime(res)
	}
	if err != nil {
		return err
	}
	top.Title.Text = plotTitle(res) + "\n" + top.Title.Text

	img := vgimg.New(10*vg.Inch, 9*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Millimeter, PadY: 6 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	plots := [][]*plot.Plot{{top}, {bottom}}
	canvases := plot.Align(plots, tiles, dc)
	top.Draw(canvases[0][0])
	bottom.Draw(canvases[1][0])
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

func plotTitle(res *Result) string {
	s := res.Settings
	t := fmt.Sprintf("weir bench %s", res.Mode)
	if topic := s["topic"]; topic != "" {
		t += ": " + topic
	}
	if rs := s["record-size"]; rs != "" {
		t += fmt.Sprintf(", %s B records", rs)
	}
	if r := s["rate"]; r != "" && r != "0" {
		t += ", target " + r + " rec/s"
	}
	if a := s["acks"]; a != "" {
		t += ", acks=" + a
	}
	return t
}

func latencyOverTime(streams []latencySeries) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Latency per interval"
	p.X.Label.Text = "time since warmup (s)"
	p.Y.Label.Text = "latency (ms)"
	p.Y.Min = 0
	var args []any
	for _, s := range streams {
		p50, p99 := make(plotter.XYs, 0, len(s.intervals)), make(plotter.XYs, 0, len(s.intervals))
		for _, iv := range s.intervals {
			if iv.Latency == nil {
				continue
			}
			p50 = append(p50, plotter.XY{X: iv.ElapsedS, Y: iv.Latency.P50})
			p99 = append(p99, plotter.XY{X: iv.ElapsedS, Y: iv.Latency.P99})
		}
		args = append(args, s.name+" p50", p50, s.name+" p99", p99)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return nil, err
	}
	p.X.Min = 0
	p.Legend.Top = true
	headroom(p)
	p.Add(plotter.NewGrid())
	return p, nil
}

// headroom raises the y axis so that the legend, drawn inside the plot at
// the top, does not cover the lines. A plot without data (a run stopped
// during warmup) gets plain 0..1 axes and says so.
func headroom(p *plot.Plot) {
	if math.IsInf(p.Y.Max, 0) || p.Y.Max <= p.Y.Min {
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
		if _, isLog := p.X.Scale.(plot.LogScale); isLog {
			p.X.Min, p.X.Max = 1, 10 // a log axis cannot start at 0
		}
		p.Title.Text += " (no data)"
		return
	}
	p.Y.Max += (p.Y.Max - p.Y.Min) * 0.25
}

// latencyDistribution plots latency against percentile on the classic
// HdrHistogram axis: x = 1/(1-q), log scale, so 90%, 99%, 99.9% ... are
// evenly spaced and the tail gets as much room as the median.
func latencyDistribution(streams []latencySeries) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Latency by percentile"
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency (ms)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.TickerFunc(percentileTicks)
	p.Y.Min = 0
	var args []any
	for _, s := range streams {
		xys := make(plotter.XYs, 0, len(s.dist))
		for _, pt := range s.dist {
			xys = append(xys, plotter.XY{X: percentileX(pt.Percentile, s.count), Y: pt.Ms})
		}
		args = append(args, s.name, xys)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return nil, err
	}
	// The log axis needs a range above 0 even for very few samples.
	p.X.Min, p.X.Max = 1, math.Max(p.X.Max, 10)
	p.Legend.Top = true
	p.Legend.Left = true
	headroom(p)
	p.Add(plotter.NewGrid())
	return p, nil
}

// percentileX maps a percentile to 1/(1-q). The max (100%) would be at
// infinity; with n samples it is the top 1/n, so it goes to x = n.
func percentileX(pct float64, n int64) float64 {
	if pct >= 100 {
		return math.Max(float64(n), 1)
	}
	return 1 / (1 - pct/100)
}

// percentileTicks labels x = 10^k as the percentile it stands for (90%,
// 99%, ...), plus 50% at x = 2.
func percentileTicks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	add := func(x float64, label string) {
		if x >= lo*0.999 && x <= hi*1.001 {
			ticks = append(ticks, plot.Tick{Value: x, Label: label})
		}
	}
	add(1, "0%")
	add(2, "50%")
	for k := 1; k <= 9; k++ {
		x := math.Pow(10, float64(k))
		add(x, strconv.FormatFloat(100-100/x, 'f', -1, 64)+"%")
		for m := 2; m <= 9; m++ {
			add(x/10*float64(m), "") // minor ticks
		}
	}
	return ticks
}

func throughputOverTime(res *Result) (*plot.Plot, *plot.Plot, error) {
	rp, mp := plot.New(), plot.New()
	rp.Title.Text, mp.Title.Text = "Records per second per interval", "MB per second per interval"
	rp.Y.Label.Text, mp.Y.Label.Text = "records/s", "MB/s (10^6 B)"
	rp.X.Label.Text, mp.X.Label.Text = "time since warmup (s)", "time since warmup (s)"
	rp.Y.Min, mp.Y.Min = 0, 0
	var rargs, margs []any
	add := func(name string, ivs []Interval) {
		r, m := make(plotter.XYs, len(ivs)), make(plotter.XYs, len(ivs))
		for i, iv := range ivs {
			r[i] = plotter.XY{X: iv.ElapsedS, Y: iv.RecordsPerSec}
			m[i] = plotter.XY{X: iv.ElapsedS, Y: iv.MBPerSec}
		}
		rargs = append(rargs, name, r)
		margs = append(margs, name, m)
	}
	if res.Produce != nil {
		add("produce", res.Produce.Intervals)
	}
	if res.Consume != nil {
		add("consume", res.Consume.Intervals)
	}
	if err := plotutil.AddLinePoints(rp, rargs...); err != nil {
		return nil, nil, err
	}
	if err := plotutil.AddLinePoints(mp, margs...); err != nil {
		return nil, nil, err
	}
	for _, p := range []*plot.Plot{rp, mp} {
		p.X.Min = 0
		p.Legend.Top = true
		headroom(p)
		p.Add(plotter.NewGrid())
	}
	return rp, mp, nil
}
