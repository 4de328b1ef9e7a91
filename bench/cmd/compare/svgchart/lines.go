package svgchart

import (
	"math"
	"strings"
)

// Lines is a line chart: each Line's points joined in the order given,
// each point marked, on a linear y axis from 0 and an x axis that is
// logarithmic when LogX is set, linear from 0 otherwise.
type Lines struct {
	Title    string
	Subtitle string // wrapped under the title; may be empty
	XLabel   string
	YLabel   string
	LogX     bool
	Lines    []Line
}

// Line is one series of a line chart. A point whose X or Y is NaN,
// infinite or negative (or whose X is 0 on a logarithmic axis) is left
// out; a line left without points is left out of the legend too.
type Line struct {
	Name   string
	Color  int  // index into the palette: lines of one subject share one
	Dashed bool // e.g. a tail quantile beside a solid median
	Points []Point
}

// Point is one (x, y) of a line.
type Point struct{ X, Y float64 }

const plotHeight = 300.0

// points returns the line's drawable points.
func (l Line) points(logX bool) []Point {
	var ps []Point
	for _, p := range l.Points {
		if usable(p.X) && usable(p.Y) && (!logX || p.X > 0) {
			ps = append(ps, p)
		}
	}
	return ps
}

// SVG returns the chart as a standalone SVG document, Width pixels wide.
// With no drawable point at all it still has its axes.
func (lc Lines) SVG() []byte {
	c := &canvas{}
	y := c.heading(lc.Title, lc.Subtitle)
	var entries []legendEntry
	minX, maxX, maxY := math.Inf(1), 0.0, 0.0
	for _, l := range lc.Lines {
		ps := l.points(lc.LogX)
		if len(ps) == 0 {
			continue
		}
		entries = append(entries, legendEntry{name: l.Name, color: color(l.Color), line: true, dashed: l.Dashed})
		for _, p := range ps {
			minX, maxX, maxY = math.Min(minX, p.X), math.Max(maxX, p.X), math.Max(maxY, p.Y)
		}
	}
	y = c.legend(entries, y, true)
	top := y + 14
	bottom := top + plotHeight
	left, right := 76.0, float64(Width)-28

	yTicks := niceTicks(maxY)
	yDomain := yTicks[len(yTicks)-1]
	yOf := func(v float64) float64 { return bottom - v/yDomain*(bottom-top) }
	xTicks, xOf := lc.xAxis(minX, maxX, left, right)

	for _, t := range yTicks {
		c.line(left, yOf(t), right, yOf(t), "#e3e3e3")
		c.text(left-6, yOf(t)+4, "end", ` fill="#444444"`, Format(t))
	}
	for _, t := range xTicks {
		c.line(xOf(t), top, xOf(t), bottom, "#e3e3e3")
		c.text(xOf(t), bottom+16, "middle", ` fill="#444444"`, Format(t))
	}
	c.line(left, top, left, bottom, "#333333")
	c.line(left, bottom, right, bottom, "#333333")
	c.text((left+right)/2, bottom+36, "middle", "", lc.XLabel)
	c.printf(`<text x="18" y="%s" text-anchor="middle" transform="rotate(-90 18 %s)">%s</text>`+"\n",
		num((top+bottom)/2), num((top+bottom)/2), esc(lc.YLabel))

	for _, l := range lc.Lines {
		ps := l.points(lc.LogX)
		if len(ps) == 0 {
			continue
		}
		var pts []string
		for _, p := range ps {
			pts = append(pts, num(xOf(p.X))+","+num(yOf(p.Y)))
		}
		dash := ""
		if l.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		c.printf(`<polyline class="line" data-series="%s" fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n",
			esc(l.Name), color(l.Color), dash, strings.Join(pts, " "))
		for _, p := range ps {
			c.printf(`<circle cx="%s" cy="%s" r="3" fill="%s"><title>%s</title></circle>`+"\n",
				num(xOf(p.X)), num(yOf(p.Y)), color(l.Color), esc(l.Name+": "+Format(p.Y)+" at "+Format(p.X)))
		}
	}
	return c.document(lc.Title, bottom+50)
}

// xAxis returns the x ticks and the pixel of an x value, for points
// spanning minX to maxX (minX > maxX when there are none).
func (lc Lines) xAxis(minX, maxX, left, right float64) ([]float64, func(float64) float64) {
	if !lc.LogX {
		ticks := niceTicks(maxX)
		d := ticks[len(ticks)-1]
		return ticks, func(v float64) float64 { return left + v/d*(right-left) }
	}
	if minX > maxX {
		minX, maxX = 1, 10
	}
	lo, hi := math.Floor(math.Log10(minX)), math.Ceil(math.Log10(maxX))
	if hi <= lo {
		hi = lo + 1
	}
	// Decades; over two decades or fewer, 2 and 5 times each too. The
	// axis runs from the last tick at or below minX to the first at or
	// above maxX.
	steps := []float64{1}
	if hi-lo <= 2 {
		steps = []float64{1, 2, 5}
	}
	var all []float64
	for e := lo; e <= hi; e++ {
		for _, m := range steps {
			all = append(all, m*math.Pow(10, e))
		}
	}
	first, last := 0, len(all)-1
	for i, t := range all {
		if t <= minX*(1+1e-9) {
			first = i
		}
	}
	for i := len(all) - 1; i >= 0; i-- {
		if all[i] >= maxX*(1-1e-9) {
			last = i
		}
	}
	if last <= first { // one x value: a step either side
		first, last = max(0, first-1), min(len(all)-1, last+1)
	}
	ticks := all[first : last+1]
	lo, hi = math.Log10(ticks[0]), math.Log10(ticks[len(ticks)-1])
	return ticks, func(v float64) float64 { return left + (math.Log10(v)-lo)/(hi-lo)*(right-left) }
}
