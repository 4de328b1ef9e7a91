package main

// An internal test: package main cannot be imported by an external one.

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe/bench"
)

func measured(rowsPerSecond float64) bench.Measure {
	return bench.Measure{N: int(rowsPerSecond), Elapsed: time.Second}
}

// drainOnly is a run that measured the drain workload and nothing else,
// one contender having failed at NORMAL.
func drainOnly() *run {
	r := &run{sz: quick, syncs: []bench.Sync{bench.SyncFull, bench.SyncNormal}}
	cs := []contender{{name: tfDrain1}, {name: rawAll}}
	r.plots.addRates("drain", cs, r.syncs, map[cell]bench.Measure{
		{tfDrain1, bench.SyncFull}: measured(2000), {tfDrain1, bench.SyncNormal}: measured(7000),
		{rawAll, bench.SyncFull}: measured(8000),
	})
	return r
}

func TestWritePlots(t *testing.T) {
	withClaims := func() *run {
		r := drainOnly()
		f := &scaleFile{lat: map[bench.Sync][]time.Duration{pgSync: {time.Millisecond, 3 * time.Millisecond}}}
		r.plots.addClaims("pgstore", 10_000, f, []bench.Sync{pgSync})
		return r
	}
	cases := []struct {
		name  string
		run   *run
		files []string
	}{
		{"nothing measured", &run{sz: quick}, nil},
		{"drain only", drainOnly(), []string{"drain.svg"}},
		{"drain and claims", withClaims(), []string{"claim-latency.svg", "drain.svg"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			dir := filepath.Join(t.TempDir(), "plots")
			is.NoErr(tc.run.writePlots(dir)) // writing the charts
			entries, err := os.ReadDir(dir)
			if len(tc.files) == 0 {
				is.True(os.IsNotExist(err))          // no chart, no folder
				is.Equal(tc.run.plotsMarkdown(), "") // no chart, no section
				return
			}
			is.NoErr(err) // the plots folder exists
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
				doc, err := os.ReadFile(filepath.Join(dir, e.Name()))
				is.NoErr(err)           // reading a chart
				is.NoErr(validXML(doc)) // a chart is not valid XML
			}
			is.Equal(names, tc.files) // the charts written
			md := tc.run.plotsMarkdown()
			for _, f := range tc.files {
				is.True(strings.Contains(md, "](plots/"+f+")")) // the report links every chart written
			}
		})
	}
}

func TestRateChart(t *testing.T) {
	is := is.New(t)
	doc := string(drainOnly().rateChart("drain", "", "drain"))
	for _, want := range []string{tfDrain1, rawAll, "SQLite synchronous=FULL", "SQLite synchronous=NORMAL", "8k"} {
		is.True(strings.Contains(doc, want)) // a contender, setting or value is missing
	}
	is.Equal(strings.Count(doc, `class="bar"`), 3)                 // three figures, three bars: the failed one has none
	is.True(!strings.Contains(doc, "PostgreSQL"))                  // no PostgreSQL figure, no PostgreSQL legend entry
	is.Equal(colorOf(doc, "SQLite synchronous=NORMAL"), "#E69F00") // NORMAL's color

	normal := &run{sz: quick, syncs: []bench.Sync{bench.SyncNormal}} // a -sync NORMAL run
	normal.plots.addRates("drain", []contender{{name: tfDrain1}}, normal.syncs, map[cell]bench.Measure{{tfDrain1, bench.SyncNormal}: measured(7000)})
	is.Equal(colorOf(string(normal.rateChart("drain", "", "drain")), "SQLite synchronous=NORMAL"), "#E69F00") // NORMAL keeps its color alone
}

// colorOf returns the fill of the first bar of series.
func colorOf(doc, series string) string {
	_, rest, _ := strings.Cut(doc, `data-series="`+series+`"`)
	_, rest, _ = strings.Cut(rest, `fill="`)
	c, _, _ := strings.Cut(rest, `"`)
	return c
}

func validXML(doc []byte) error {
	d := xml.NewDecoder(bytes.NewReader(doc))
	for {
		if _, err := d.Token(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}
