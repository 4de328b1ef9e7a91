package main

import (
	"context"
	"fmt"
	"io"

	"github.com/turnframe/turnframe"
)

// listPage is how many rows a listing ('outbox', 'turns') reads from the
// store at a time: the most it holds at once, whatever --limit says.
const listPage = 100

// pageSize returns how many rows a listing reads at a time.
func (e *env) pageSize() int {
	if e.page > 0 {
		return e.page
	}
	return listPage
}

// checkListLimit returns a usage error unless 1 ≤ limit ≤ MaxLimit: the
// ceiling of every listing's --limit.
func checkListLimit(limit int) error {
	if err := turnframe.CheckLimit("limit", limit); err != nil {
		return usagef("--limit %d is not between 1 and %d (the ceiling of a listing; page on with --after)", limit, turnframe.MaxLimit)
	}
	return nil
}

// pageThrough reads a listing a page at a time and hands each page to
// write, as it comes: read returns at most n items after the cursor
// (the zero cursor: from the first), and key gives an item's cursor. It
// stops after limit items, or at the end. When it stopped at the limit
// and at least one more item follows, next is the cursor to go on from;
// otherwise next is "". At most one page is held at a time.
func pageThrough[T any](ctx context.Context, e *env, limit int, after string,
	read func(ctx context.Context, after string, n int) ([]T, error), key func(T) string,
	write func([]T) error) (next string, err error) {
	n := 0
	for n < limit {
		want := min(e.pageSize(), limit-n)
		page, err := read(ctx, after, want)
		if err != nil {
			return "", err
		}
		if len(page) > 0 {
			if err := write(page); err != nil {
				return "", err
			}
			n += len(page)
			after = key(page[len(page)-1])
		}
		if len(page) < want {
			return "", nil
		}
	}
	more, err := read(ctx, after, 1)
	if err != nil || len(more) == 0 {
		return "", err
	}
	return after, nil
}

// listOutput writes a listing as it is read: a table whose columns are
// aligned a page at a time (the header once, above the first page), or one
// JSON array streamed element by element.
type listOutput struct {
	w      io.Writer
	header []string
	arr    *jsonArray // --json; nil for a table
	rows   int
}

func newListOutput(w io.Writer, header []string, asJSON bool) *listOutput {
	o := &listOutput{w: w, header: header}
	if asJSON {
		o.arr = newJSONArray(w, "")
	}
	return o
}

// page writes one page: its rows for a table, its views for JSON.
func (o *listOutput) page(rows [][]string, views []any) error {
	if o.arr != nil {
		for _, v := range views {
			if err := o.arr.add(v); err != nil {
				return err
			}
		}
		return nil
	}
	var header []string
	if o.rows == 0 {
		header = o.header
	}
	o.rows += len(rows)
	return writeRows(o.w, header, rows)
}

// close ends the listing: the JSON array, or a table's header alone when
// it had no rows.
func (o *listOutput) close() error {
	if o.arr != nil {
		if err := o.arr.close(); err != nil {
			return err
		}
		_, err := io.WriteString(o.w, "\n")
		return err
	}
	if o.rows == 0 {
		return writeRows(o.w, o.header, nil)
	}
	return nil
}

// moreHint tells, on stderr so the listing stays parseable, that the
// listing stopped at --limit and how to read on.
func moreHint(e *env, command, next string) {
	if next != "" {
		fmt.Fprintf(e.stderr, "more: the listing stopped at --limit; read on with 'turnframe %s --after %s' (and the same filters)\n", command, next)
	}
}
