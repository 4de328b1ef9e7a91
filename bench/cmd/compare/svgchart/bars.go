package svgchart

import "math"

// Bars is a horizontal grouped bar chart: one band per category, labelled
// on the left, holding one bar per series that has a value for it, in the
// order of Series. Horizontal bars leave room for long category names.
type Bars struct {
	Title    string
	Subtitle string // wrapped under the title; may be empty
	Unit     string // the value axis's label, e.g. "rows/s"
	// Categories are the bands, top to bottom.
	Categories []string
	// Series are the bars of each band. Series[j].Values[i] is the value
	// of category i; a value that is NaN, infinite or negative, or past
	// the end of Values, is missing: no bar is drawn for it.
	Series []Series
}

// Series is one named set of values, drawn in one color.
type Series struct {
	Name   string
	Values []float64
}

// value returns the series' value for category i, and whether it has one.
func (s Series) value(i int) (float64, bool) {
	if i >= len(s.Values) || !usable(s.Values[i]) {
		return 0, false
	}
	return s.Values[i], true
}

const (
	barHeight  = 14.0
	barGap     = 2.0
	bandGap    = 12.0
	maxLabel   = 290.0 // widest category label column, pixels
	labelRunes = 42    // the runes of a category label that fit in maxLabel
)

// SVG returns the chart as a standalone SVG document, Width pixels wide
// and as tall as its bands need. A category without any value gets a
// band saying "no figure"; a chart without any value at all still has
// its axes, from 0 to 1.
func (b Bars) SVG() []byte {
	c := &canvas{}
	y := c.heading(b.Title, b.Subtitle)
	var entries []legendEntry
	max := 0.0
	for j, s := range b.Series {
		has := false
		for i := range b.Categories {
			if v, ok := s.value(i); ok {
				has = true
				max = math.Max(max, v)
			}
		}
		if has {
			entries = append(entries, legendEntry{name: s.Name, color: color(j)})
		}
	}
	y = c.legend(entries, y, true)

	labelW := 0.0
	for _, cat := range b.Categories {
		labelW = math.Max(labelW, textWidth(cat)+12)
	}
	labelW = math.Min(labelW, maxLabel)
	left, right := 16+labelW, float64(Width)-72
	ticks := niceTicks(max)
	domain := ticks[len(ticks)-1]
	x := func(v float64) float64 { return left + v/domain*(right-left) }

	top := y + 10
	// The bands first, into their own canvas: the grid goes under them
	// and needs the bottom they reach.
	bands := &canvas{}
	y = top + bandGap/2
	for i, cat := range b.Categories {
		n := 0
		for _, s := range b.Series {
			if _, ok := s.value(i); ok {
				n++
			}
		}
		h := math.Max(1, float64(n))*(barHeight+barGap) - barGap
		bands.text(left-8, y+h/2+4, "end", "", clip(cat, labelRunes))
		if n == 0 {
			bands.text(left+6, y+h/2+4, "start", ` fill="#888888" font-style="italic"`, "no figure")
		}
		by := y
		for j, s := range b.Series {
			v, ok := s.value(i)
			if !ok {
				continue
			}
			bands.printf(`<rect class="bar" data-series="%s" data-category="%s" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s</title></rect>`+"\n",
				esc(s.Name), esc(cat), num(left), num(by), num(x(v)-left), num(barHeight), color(j), esc(cat+", "+s.Name+": "+Format(v)))
			bands.text(x(v)+4, by+barHeight-3, "start", ` font-size="11"`, Format(v))
			by += barHeight + barGap
		}
		y += h + bandGap
	}
	bottom := y - bandGap/2

	for _, t := range ticks {
		c.line(x(t), top, x(t), bottom, "#e3e3e3")
		c.text(x(t), bottom+16, "middle", ` fill="#444444"`, Format(t))
	}
	c.b.WriteString(bands.b.String())
	c.line(left, top, left, bottom, "#333333")
	c.line(left, bottom, right, bottom, "#333333")
	c.text((left+right)/2, bottom+36, "middle", "", b.Unit)
	return c.document(b.Title, bottom+50)
}
