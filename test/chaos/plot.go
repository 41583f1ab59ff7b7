package chaos

import (
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// WritePNG draws the timeline: acked records/s, ack latency p99, and unavailable
// partitions per second, each with the faults marked.
func (r *Report) WritePNG(path string) error {
	mk := func(title, ylabel string) *plot.Plot {
		p := plot.New()
		p.Title.Text = title
		p.Y.Label.Text = ylabel
		p.X.Label.Text = "seconds"
		p.Legend.Top = true
		return p
	}
	xy := func(f func(Sample) float64) plotter.XYs {
		pts := make(plotter.XYs, len(r.Timeline))
		for i, s := range r.Timeline {
			pts[i] = plotter.XY{X: s.T, Y: f(s)}
		}
		return pts
	}
	addLine := func(p *plot.Plot, name string, pts plotter.XYs, c color.Color) error {
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = c
		p.Add(l)
		p.Legend.Add(name, l)
		return nil
	}
	tput := mk("Weir chaos: throughput", "acked records/s")
	if err := addLine(tput, "acked/s", xy(func(s Sample) float64 { return float64(s.Acked) }), color.RGBA{B: 200, A: 255}); err != nil {
		return err
	}
	if err := addLine(tput, "failed/s", xy(func(s Sample) float64 { return float64(s.Failed) }), color.RGBA{R: 200, A: 255}); err != nil {
		return err
	}
	// End-to-end latency is left out: it shows the consumer group's lag behind the
	// producers (hundreds of partitions per member), which dwarfs the broker's latency;
	// the report gives it per fault.
	lat := mk("produce latency p99 (send to ack)", "ms")
	if err := addLine(lat, "ack p99", xy(func(s Sample) float64 { return s.AckP99 }), color.RGBA{G: 140, A: 255}); err != nil {
		return err
	}
	un := mk("unavailable partitions", "partitions")
	if err := addLine(un, "unavailable", xy(func(s Sample) float64 { return float64(s.Unavailable) }), color.RGBA{R: 220, G: 100, A: 255}); err != nil {
		return err
	}
	for _, p := range []*plot.Plot{tput, lat, un} {
		markFaults(p, r.Faults)
	}
	const w, h = 12 * vg.Inch, 10 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 3, Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadX: vg.Points(4), PadY: vg.Points(8)}
	canvases := plot.Align([][]*plot.Plot{{tput}, {lat}, {un}}, tiles, dc)
	tput.Draw(canvases[0][0])
	lat.Draw(canvases[1][0])
	un.Draw(canvases[2][0])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	png := vgimg.PngCanvas{Canvas: img}
	if _, err := png.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// markFaults draws a vertical line at each fault's start and names it.
func markFaults(p *plot.Plot, faults []FaultReport) {
	p.Y.Min = 0
	top := p.Y.Max
	if top <= 0 {
		top = 1
	}
	for _, f := range faults {
		x := float64(f.At) / 1e9
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top}})
		if err != nil {
			continue
		}
		l.Color = color.RGBA{A: 120}
		l.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		p.Add(l)
		labels, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: x, Y: top}}, Labels: []string{f.Fault}})
		if err == nil {
			p.Add(labels)
		}
	}
}
