package svgchart_test

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe/bench/cmd/compare/svgchart"
)

// element is one start element of a parsed document.
type element struct {
	name  string
	attrs map[string]string
}

// parse decodes every token of doc, failing the test on invalid XML, and
// returns the start elements and all character data.
func parse(t *testing.T, doc []byte) ([]element, string) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	var els []element
	var text strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return els, text.String()
		}
		if err != nil {
			t.Fatalf("invalid XML: %v\n%s", err, doc)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := element{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			els = append(els, e)
		case xml.CharData:
			text.Write(tok)
			text.WriteByte('\n')
		}
	}
}

// bars returns the bar rectangles' widths by series, in document order.
func bars(els []element) map[string][]float64 {
	out := map[string][]float64{}
	for _, e := range els {
		if e.name == "rect" && e.attrs["class"] == "bar" {
			w, _ := strconv.ParseFloat(e.attrs["width"], 64)
			out[e.attrs["data-series"]] = append(out[e.attrs["data-series"]], w)
		}
	}
	return out
}

// badNumber matches what a float printed carelessly looks like.
var badNumber = regexp.MustCompile(`NaN|Inf|[0-9]e[+-][0-9]`)

func noBadNumbers(t *testing.T, doc []byte) {
	t.Helper()
	if bad := badNumber.Find(doc); bad != nil {
		t.Errorf("markup holds %q:\n%s", bad, doc)
	}
}

func TestBars(t *testing.T) {
	chart := svgchart.Bars{
		Title:      "drain <rows/s> & more",
		Subtitle:   "median of 3",
		Unit:       "rows/s",
		Categories: []string{"turnframe c=1", "raw: settle all", "River"},
		Series: []svgchart.Series{
			{Name: "FULL", Values: []float64{1000, 4000, 2000}},
			{Name: "NORMAL", Values: []float64{3000, 12000}}, // River missing
		},
	}
	doc := chart.SVG()

	t.Run("valid XML with every label", func(t *testing.T) {
		is := is.New(t)
		_, text := parse(t, doc)
		for _, want := range []string{"drain <rows/s> & more", "median of 3", "rows/s", "turnframe c=1", "raw: settle all", "River", "FULL", "NORMAL", "12k"} {
			is.True(strings.Contains(text, want)) // a title, label, legend entry or value is missing
		}
	})

	t.Run("bar lengths scale with values", func(t *testing.T) {
		is := is.New(t)
		els, _ := parse(t, doc)
		got := bars(els)
		is.Equal(len(got["FULL"]), 3)   // one FULL bar per category
		is.Equal(len(got["NORMAL"]), 2) // no bar for the missing value
		longest := got["NORMAL"][1]     // the bar of 12000
		is.True(longest > 100)          // the longest bar spans most of the plot
		for i, v := range []float64{1000, 4000, 2000} {
			is.True(math.Abs(got["FULL"][i]/longest-v/12000) < 0.002) // FULL bar not proportional to its value
		}
		is.True(math.Abs(got["NORMAL"][0]/longest-3000.0/12000) < 0.002) // NORMAL bar not proportional to its value
	})

	t.Run("same input, same bytes", func(t *testing.T) {
		is := is.New(t)
		is.Equal(string(chart.SVG()), string(doc)) // output is not deterministic
	})
}

func TestBarsDegenerate(t *testing.T) {
	cases := []struct {
		name  string
		chart svgchart.Bars
		bars  int
	}{
		{"no categories", svgchart.Bars{Title: "empty"}, 0},
		{"all zero", svgchart.Bars{Title: "zero", Categories: []string{"a", "b"},
			Series: []svgchart.Series{{Name: "FULL", Values: []float64{0, 0}}}}, 2},
		{"bad values are missing", svgchart.Bars{Title: "bad", Categories: []string{"a", "b", "c", "d"},
			Series: []svgchart.Series{{Name: "FULL", Values: []float64{math.NaN(), math.Inf(1), -5, 7}}}}, 1},
		{"no values at all", svgchart.Bars{Title: "none", Categories: []string{"a"},
			Series: []svgchart.Series{{Name: "FULL"}}}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			doc := tc.chart.SVG()
			els, _ := parse(t, doc)
			n := 0
			for _, ws := range bars(els) {
				n += len(ws)
			}
			is.Equal(n, tc.bars) // bars drawn
			noBadNumbers(t, doc)
		})
	}
}

func TestLines(t *testing.T) {
	chart := svgchart.Lines{
		Title:  "claim latency",
		XLabel: "finished rows",
		YLabel: "ms",
		LogX:   true,
		Lines: []svgchart.Line{
			{Name: "sqlitestore FULL median", Points: []svgchart.Point{{10_000, 0.5}, {1_000_000, 0.6}}},
			{Name: "sqlitestore FULL p90", Dashed: true, Points: []svgchart.Point{{10_000, 0.9}, {1_000_000, 1.2}}},
			{Name: "pgstore median", Color: 2, Points: []svgchart.Point{{10_000, 0.7}, {200_000, 0}, {1_000_000, math.NaN()}}},
			{Name: "not measured", Color: 3},
		},
	}
	doc := chart.SVG()
	is := is.New(t)
	els, text := parse(t, doc)
	for _, want := range []string{"claim latency", "finished rows", "ms", "sqlitestore FULL median", "sqlitestore FULL p90", "pgstore median", "10k", "100k", "1M"} {
		is.True(strings.Contains(text, want)) // a label, tick or legend entry is missing
	}
	is.True(!strings.Contains(text, "not measured")) // a line without points is not in the legend
	points := map[string]int{}
	dashed := map[string]bool{}
	for _, e := range els {
		if e.name == "polyline" {
			points[e.attrs["data-series"]] = len(strings.Fields(e.attrs["points"]))
			dashed[e.attrs["data-series"]] = e.attrs["stroke-dasharray"] != ""
		}
	}
	is.Equal(points, map[string]int{"sqlitestore FULL median": 2, "sqlitestore FULL p90": 2, "pgstore median": 2}) // the NaN point is left out, the zero kept
	is.True(dashed["sqlitestore FULL p90"] && !dashed["sqlitestore FULL median"])                                  // only the p90 line is dashed
	noBadNumbers(t, doc)
	is.Equal(string(chart.SVG()), string(doc)) // output is not deterministic
}

func TestLinesDegenerate(t *testing.T) {
	cases := []struct {
		name   string
		chart  svgchart.Lines
		points int
	}{
		{"log x, only x = 0", svgchart.Lines{LogX: true, Lines: []svgchart.Line{{Name: "x", Points: []svgchart.Point{{0, 0}}}}}, 0},
		{"linear x, all zero", svgchart.Lines{Lines: []svgchart.Line{{Name: "x", Points: []svgchart.Point{{0, 0}, {0, 0}}}}}, 2},
		{"log x, one point", svgchart.Lines{LogX: true, Lines: []svgchart.Line{{Name: "x", Points: []svgchart.Point{{1000, 0.3}}}}}, 1},
		{"no lines", svgchart.Lines{LogX: true}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			doc := tc.chart.SVG()
			els, _ := parse(t, doc)
			n := 0
			for _, e := range els {
				if e.name == "circle" {
					n++
				}
			}
			is.Equal(n, tc.points) // points marked
			noBadNumbers(t, doc)
		})
	}
}

func TestFormat(t *testing.T) {
	cases := []struct {
		in   float64
		want string
	}{
		{0, "0"}, {0.25, "0.25"}, {0.004, "0.004"}, {1.5, "1.5"}, {12.34, "12.3"}, {250, "250"},
		{1000, "1k"}, {12345, "12.3k"}, {250_000, "250k"}, {1_000_000, "1M"}, {math.NaN(), "?"}, {math.Inf(-1), "?"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			is := is.New(t)
			is.Equal(svgchart.Format(tc.in), tc.want) // formatted number
		})
	}
}
