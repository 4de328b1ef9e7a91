// Package svgchart draws the benchmark report's charts as standalone SVG
// documents: a horizontal grouped bar chart (Bars) and a line chart
// (Lines), with axes, ticks, labels and a legend, about 720 px wide.
//
// Output is deterministic: the same chart value gives byte-identical SVG
// (no maps are iterated, every number is formatted with fixed precision).
// Text is XML-escaped. A value that is NaN, infinite or negative is
// treated as missing and never reaches the markup.
package svgchart

import (
	"encoding/xml"
	"math"
	"strconv"
	"strings"
)

// Width is the width in pixels of every chart.
const Width = 720

// palette holds colors told apart with the common kinds of color
// blindness (Okabe and Ito), yellow left out: it is unreadable on white.
var palette = [...]string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000"}

// color returns the palette's color i, wrapping around.
func color(i int) string {
	if i < 0 {
		i = -i
	}
	return palette[i%len(palette)]
}

const (
	fontSize      = 12
	charWidth     = 6.6 // rough width of one character of 12 px sans-serif
	titleSize     = 15
	subtitleRunes = 104 // runes of a subtitle line: (Width - 32) / charWidth
)

// usable reports whether v can be drawn: finite and not negative.
func usable(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0
}

// canvas accumulates the body of one SVG document; document wraps it
// once its height is known.
type canvas struct {
	b strings.Builder
}

// document returns the whole SVG: a white background (the chart stays
// readable on a dark page), the body, and title as the document's title.
func (c *canvas) document(title string, height float64) []byte {
	var d canvas
	d.b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	d.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%s" viewBox="0 0 %d %s" font-family="sans-serif" font-size="%d">`+"\n",
		Width, num(height), Width, num(height), fontSize)
	d.printf("<title>%s</title>\n", esc(title))
	d.printf(`<rect x="0" y="0" width="%d" height="%s" fill="#ffffff"/>`+"\n", Width, num(height))
	d.b.WriteString(c.b.String())
	d.b.WriteString("</svg>\n")
	return []byte(d.b.String())
}

// printf writes format with each %s, %d and %% replaced: a tiny subset of
// fmt that keeps every number's format under this package's control.
func (c *canvas) printf(format string, args ...any) {
	i := 0
	for j := 0; j < len(format); j++ {
		if format[j] != '%' || j+1 == len(format) {
			c.b.WriteByte(format[j])
			continue
		}
		j++
		switch format[j] {
		case '%':
			c.b.WriteByte('%')
		case 's':
			c.b.WriteString(args[i].(string))
			i++
		case 'd':
			c.b.WriteString(strconv.Itoa(args[i].(int)))
			i++
		default:
			c.b.WriteByte('%')
			c.b.WriteByte(format[j])
		}
	}
}

// text writes one text element; anchor is "start", "middle" or "end".
func (c *canvas) text(x, y float64, anchor, extra, s string) {
	c.printf(`<text x="%s" y="%s" text-anchor="%s"%s>%s</text>`+"\n", num(x), num(y), anchor, extra, esc(s))
}

func (c *canvas) line(x1, y1, x2, y2 float64, stroke string) {
	c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`+"\n", num(x1), num(y1), num(x2), num(y2), stroke)
}

// heading writes the title and the subtitle and returns the y below them.
func (c *canvas) heading(title, subtitle string) float64 {
	c.text(16, 24, "start", ` font-size="`+strconv.Itoa(titleSize)+`" font-weight="bold"`, title)
	if subtitle == "" {
		return 34
	}
	y := 24.0
	for _, l := range wrap(subtitle, subtitleRunes) {
		y += 16
		c.text(16, y, "start", ` fill="#444444"`, l)
	}
	return y + 10
}

// legendEntry is one item of a legend: a swatch and a name. The swatch
// is a block of color for a bar, a line (maybe dashed) for a line.
type legendEntry struct {
	name, color  string
	line, dashed bool
}

// legend lays the entries out in rows from y and returns the y below
// them. With draw false it only measures.
func (c *canvas) legend(entries []legendEntry, y float64, draw bool) float64 {
	if len(entries) == 0 {
		return y
	}
	x := 16.0
	y += 12
	for _, e := range entries {
		w := 28 + textWidth(e.name) + 18
		if x > 16 && x+w > Width-16 {
			x = 16
			y += 18
		}
		if draw {
			if e.line {
				dash := ""
				if e.dashed {
					dash = ` stroke-dasharray="5 3"`
				}
				c.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2.5"%s/>`+"\n",
					num(x), num(y-4), num(x+22), num(y-4), e.color, dash)
			} else {
				c.printf(`<rect x="%s" y="%s" width="22" height="10" fill="%s"/>`+"\n", num(x), num(y-9), e.color)
			}
			c.text(x+28, y, "start", "", e.name)
		}
		x += w
	}
	return y + 12
}

// textWidth estimates the rendered width of s in pixels.
func textWidth(s string) float64 {
	return float64(len([]rune(s))) * charWidth
}

// wrap breaks s into lines of at most max runes, at spaces.
func wrap(s string, max int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len([]rune(line))+1+len([]rune(w)) > max {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// clip shortens s to at most max runes, ending it with an ellipsis.
func clip(s string, max int) string {
	r := []rune(s)
	if len(r) <= max || max < 2 {
		return s
	}
	return string(r[:max-1]) + "…"
}

// esc returns s escaped for XML text and attribute values.
func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// num formats a coordinate: one decimal at most, no trailing zeros, and 0
// for anything not finite (which no caller should pass).
func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "0"
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	if s == "-0" {
		return "0"
	}
	return s
}

// Format returns v as a chart shows it: three significant digits at most,
// k for thousands and M for millions (12345 → "12.3k", 0.25 → "0.25",
// 1000000 → "1M").
func Format(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "?"
	}
	neg := v < 0
	v = math.Abs(v)
	suffix := ""
	switch {
	case v >= 1e6:
		v, suffix = v/1e6, "M"
	case v >= 1e3:
		v, suffix = v/1e3, "k"
	}
	prec := 0
	switch {
	case v == 0:
	case v < 0.01:
		prec = 4
	case v < 1:
		prec = 3
	case v < 10:
		prec = 2
	case v < 100:
		prec = 1
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if neg {
		s = "-" + s
	}
	return s + suffix
}

// niceTicks returns ticks 0, step, 2·step, … covering max, step being 1, 2
// or 5 times a power of ten, about five of them.
func niceTicks(max float64) []float64 {
	if !usable(max) || max == 0 {
		max = 1
	}
	raw := max / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag * 10
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ticks []float64
	for i := 0; ; i++ {
		t := float64(i) * step
		ticks = append(ticks, t)
		if t >= max*(1-1e-9) {
			return ticks
		}
	}
}
