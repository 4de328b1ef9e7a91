package main

import (
	"io"
	"strings"
	"unicode"

	"golang.org/x/text/width"
)

// columnGap is the spaces between two aligned columns.
const columnGap = 2

// writeAligned writes lines of cells with every cell but a line's last
// padded to its column's width plus columnGap, as text/tabwriter would, but
// measuring what a terminal draws (screenWidth) rather than counting runes:
// a value in Chinese or with combining accents would otherwise push the
// columns after it out of line. The cells are written as they are given
// (the callers escape them first).
func writeAligned(w io.Writer, lines [][]string) error {
	var widths []int
	for _, cells := range lines {
		for i, c := range cells[:max(len(cells)-1, 0)] {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], screenWidth(c))
		}
	}
	var b strings.Builder
	for _, cells := range lines {
		for i, c := range cells {
			b.WriteString(c)
			if i < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-screenWidth(c)+columnGap))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// screenWidth is how many columns of a terminal s takes: two for a wide or
// fullwidth (East Asian) rune, none for a combining mark or a format
// character, one for any other. It is what terminals draw for printable
// text, which is all a table holds once its cells are escaped (cell).
func screenWidth(s string) int {
	n := 0
	for _, r := range s {
		switch k := width.LookupRune(r).Kind(); {
		case unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		case k == width.EastAsianWide || k == width.EastAsianFullwidth:
			n += 2
		default:
			n++
		}
	}
	return n
}
