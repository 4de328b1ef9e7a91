package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/matryer/is"
	"golang.org/x/text/width"
)

// screenColumn is the column of a terminal at which byte i of line is
// drawn: wide (East Asian) runes take two, combining marks none.
func screenColumn(line string, i int) int {
	col := 0
	for _, r := range line[:i] {
		switch k := width.LookupRune(r).Kind(); {
		case strings.ContainsRune("\u0301\u0308", r):
		case k == width.EastAsianWide || k == width.EastAsianFullwidth:
			col += 2
		default:
			col++
		}
	}
	return col
}

// TestTablesAlignWhatATerminalDraws proves that a column after a value of
// wide characters (a destination in Chinese) or with combining marks
// (an e and an acute accent) starts where it does on every other line, as
// a terminal draws them: not where a count of runes puts it.
func TestTablesAlignWhatATerminalDraws(t *testing.T) {
	is := is.New(t)
	var b bytes.Buffer
	is.NoErr(writeTable(&b, []string{"DESTINATION", "CODE"}, [][]string{
		{"payments", "http.500"},
		{"支付服务", "http.501"},
		{"cafe\u0301-orders", "http.502"},
		{"na\u0308ive", "http.503"},
	}))
	var cols []int
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		i := strings.Index(line, "http.")
		if i < 0 {
			i = strings.Index(line, "CODE")
		}
		cols = append(cols, screenColumn(line, i))
	}
	for _, c := range cols {
		is.Equal(c, cols[0]) // every CODE starts in the header's column
	}

	b.Reset()
	is.NoErr(writeFields(&b, [][2]string{{"destination", "支付服务"}, {"目的地", "x"}, {"code", "y"}}))
	cols = nil
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		i := strings.LastIndex(line, " ") + 1
		cols = append(cols, screenColumn(line, i))
	}
	for _, c := range cols {
		is.Equal(c, cols[0]) // every value starts in one column
	}
}
