package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// writeTable writes a header and rows as columns aligned with spaces, as a
// terminal draws them (writeAligned). Every
// cell goes through cell, so no stored value can add a row or split a
// column; an empty cell prints as "-", so every column stays readable by awk.
func writeTable(w io.Writer, header []string, rows [][]string) error {
	return writeRows(w, header, rows)
}

// writeRows is writeTable without a header line when header is nil: the
// rows of a table printed a page at a time.
func writeRows(w io.Writer, header []string, rows [][]string) error {
	lines := make([][]string, 0, len(rows)+1)
	if header != nil {
		lines = append(lines, header)
	}
	for _, row := range rows {
		cells := make([]string, len(row))
		for i, c := range row {
			if c == "" {
				c = "-"
			} else {
				c = cell(c)
			}
			cells[i] = c
		}
		lines = append(lines, cells)
	}
	return writeAligned(w, lines)
}

// writeJSON writes v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// jsonArray streams a JSON array, one element at a time, formatted as
// writeJSON formats a whole one; indent is the indentation of the line the
// array begins on. Nothing but the element being written is held.
type jsonArray struct {
	w      io.Writer
	indent string
	n      int
}

func newJSONArray(w io.Writer, indent string) *jsonArray { return &jsonArray{w: w, indent: indent} }

// add writes one element.
func (a *jsonArray) add(v any) error {
	b, err := json.MarshalIndent(v, a.indent+"  ", "  ")
	if err != nil {
		return err
	}
	sep := ",\n"
	if a.n == 0 {
		sep = "[\n"
	}
	a.n++
	_, err = io.WriteString(a.w, sep+a.indent+"  "+string(b))
	return err
}

// close ends the array (without a newline after it).
func (a *jsonArray) close() error {
	end := "\n" + a.indent + "]"
	if a.n == 0 {
		end = "[]"
	}
	_, err := io.WriteString(a.w, end)
	return err
}

// writeJSONWithArray writes the JSON object v, as writeJSON would, with one
// more field, name, whose value is an array that stream writes element by
// element: so a long list (a subject's history) is never held whole.
func writeJSONWithArray(w io.Writer, v any, name string, stream func(*jsonArray) error) error {
	return writeJSONWithArrays(w, v, []jsonStream{{name, stream}})
}

// jsonStream is one streamed field of writeJSONWithArrays: its name, and
// what writes its array element by element.
type jsonStream struct {
	name   string
	stream func(*jsonArray) error
}

// writeJSONWithArrays is writeJSONWithArray with several streamed fields,
// written in order after v's own.
func writeJSONWithArrays(w io.Writer, v any, streams []jsonStream) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	body, ok := strings.CutSuffix(string(b), "\n}")
	if !ok {
		return fmt.Errorf("write JSON: %T is not a non-empty object", v)
	}
	if _, err := io.WriteString(w, body); err != nil {
		return err
	}
	for _, s := range streams {
		key, err := json.Marshal(s.name)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(w, ",\n  "+string(key)+": "); err != nil {
			return err
		}
		arr := newJSONArray(w, "  ")
		if err := s.stream(arr); err != nil {
			return err
		}
		if err := arr.close(); err != nil {
			return err
		}
	}
	_, err = io.WriteString(w, "\n}\n")
	return err
}

// writeFields writes name/value pairs as two aligned columns, skipping empty
// values: the form of "show". Every value goes through cell.
func writeFields(w io.Writer, pairs [][2]string) error {
	var lines [][]string
	for _, p := range pairs {
		if p[1] == "" {
			continue
		}
		lines = append(lines, []string{p[0] + ":", cell(p[1])})
	}
	return writeAligned(w, lines)
}

// cell returns s as a table cell or a field value prints it: as it is, or,
// when it needs escaping, as a Go string literal (strconv.Quote). It needs
// escaping when it holds a rune that is not printable (a newline, a tab, any
// other control or format character: each would start a row, split a
// column or hide text) or is drawn as nothing or a blank (drawnBlank, then
// escaped as \u034f is), is not valid UTF-8, begins or ends with a space
// (which would shift a column), begins with a double quote (so an escaped
// value is never mistaken for a plain one) or is "-" (which stands for an
// empty cell). Stored data can then never forge a row or break the output.
func cell(s string) string {
	if needsEscape(s) {
		return quote(s)
	}
	return s
}

func needsEscape(s string) bool {
	if s == "-" || strings.HasPrefix(s, `"`) || strings.HasPrefix(s, " ") || strings.HasSuffix(s, " ") {
		return true
	}
	if !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if !strconv.IsPrint(r) || drawnBlank(r) {
			return true
		}
	}
	return false
}

// drawnBlank reports whether r is a rune strconv.IsPrint takes but that a
// terminal or a browser draws as nothing, or as a blank a reader cannot
// tell from none (turnframe's own rule for actors, Actor.Validate): a
// default-ignorable code point that is not a format character (the
// combining grapheme joiner U+034F, the Hangul fillers), a variation
// selector, the Braille blank U+2800. "recovery\u034f" would otherwise be
// shown as "recovery".
func drawnBlank(r rune) bool {
	return r == '\u2800' || unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
}

// quote is strconv.Quote, but with every drawnBlank rune escaped too
// (\u034f), which strconv.Quote leaves as it is since it is printable.
func quote(s string) string {
	if strings.IndexFunc(s, drawnBlank) < 0 {
		return strconv.Quote(s)
	}
	var b strings.Builder
	b.WriteByte('"')
	for s != "" {
		i := strings.IndexFunc(s, drawnBlank)
		if i < 0 {
			i = len(s)
		}
		q := strconv.Quote(s[:i])
		b.WriteString(q[1 : len(q)-1])
		if i == len(s) {
			break
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r > 0xffff {
			fmt.Fprintf(&b, `\U%08x`, r)
		} else {
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		s = s[i+n:]
	}
	b.WriteByte('"')
	return b.String()
}

// jsonTime is a time as --json prints it: RFC 3339 in UTC, to the
// nanosecond. Unlike time.Time's own MarshalJSON, which refuses a year
// outside 0–9999, it never fails: a file an older turnframe wrote may hold
// any time, and the output must still print (a year past 9999 prints with
// five digits). The zero time counts as empty for omitzero. Decoding is
// time.Time's (promoted), for tests and scripts reading the output back.
type jsonTime struct{ time.Time }

// at returns t as a jsonTime.
func at(t time.Time) jsonTime { return jsonTime{t} }

// MarshalJSON implements json.Marshaler; it never returns an error.
func (t jsonTime) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, t.UTC().Format(time.RFC3339Nano)), nil
}

// stamp formats a time for a table: UTC to the millisecond, "" for zero.
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// age formats how long before now t was, to a readable precision; "" for a
// zero t.
func age(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	if t.After(now) {
		return "in " + roundAge(t.Sub(now)).String() // Sub saturates: never negative here
	}
	return roundAge(now.Sub(t)).String()
}

func roundAge(d time.Duration) time.Duration {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond)
	case d < time.Hour:
		return d.Round(time.Second)
	default:
		return d.Round(time.Minute)
	}
}

// payloadText is a payload as text, when it is UTF-8, for a human and for
// JSON; otherwise "" and the base64 form.
func payloadText(b []byte) (text, b64 string) {
	if utf8.Valid(b) {
		return string(b), ""
	}
	return "", base64.StdEncoding.EncodeToString(b)
}

func itoa(n int) string { return strconv.Itoa(n) }

// payloadShown is the most bytes of a payload (its text, or "base64:" and
// its base64 form) the text output and the page show: a payload may be
// MaxPayloadLen (16 MiB), which would bury the rest of 'show' and hang a
// terminal or a browser; --json prints it whole.
const payloadShown = 4096

// payloadPreview returns a payload as the text output and the page show
// it: its text or "base64:" and its base64 form (payloadText), cut to at
// most payloadShown bytes on a rune boundary; and a note: when it was cut,
// the payload's size in bytes and where to read it whole; when it is text
// that itself begins with "base64:" (binaryLabel), that it is text, so it
// is never read as the binary payload it would print the same as. Any
// other payload has no note.
func payloadPreview(text, b64 string, size int) (shown, note string) {
	shown = text
	if b64 != "" {
		shown = binaryLabel + b64
	}
	var notes []string
	if b64 == "" && strings.HasPrefix(text, binaryLabel) {
		notes = append(notes, "text, not a binary payload in base64")
	}
	if len(shown) > payloadShown {
		cut := payloadShown
		for cut > 0 && !utf8.RuneStart(shown[cut]) {
			cut--
		}
		shown = shown[:cut]
		notes = append(notes, fmt.Sprintf("%d bytes; shown cut to %d, --json prints it whole", size, cut))
	}
	return shown, strings.Join(notes, "; ")
}

// binaryLabel begins a payload that is not UTF-8 as the text output and the
// page show it, before its base64 form.
const binaryLabel = "base64:"
