package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// The page serves one SQLite file for as long as it runs, and SQLite holds
// that file open: once the file at --db is another (a backup renamed over
// it) or gone, the page would read a file no application reads, and write
// to it and to the -wal file beside it, which the next database opened at
// that path takes up as its own, pages of another file among its pages. So
// before every page and write the page looks at the path again.

// fileMovedError is the refusal of a request once the file at --db is no
// longer the one the page opened. It is answered 503: this run of the page
// cannot serve it again, a page started anew can.
type fileMovedError struct {
	path    string
	removed bool // nothing is at the path; else another file is
}

func (e *fileMovedError) Error() string {
	what := "is no longer the file this page opened (another was put in its place: a backup restored over it?)"
	if e.removed {
		what = "was removed or moved away since this page opened it"
	}
	return fmt.Sprintf("the database file %s %s: this page no longer reads or writes it, since it would read a file "+
		"no application reads and write where none looks. Stop it, and start it again on the application's file", e.path, what)
}

// servedFile returns what the file at path is, to tell it later from
// another put in its place (checkFile); nil for a PostgreSQL URL.
func servedFile(path string) (fs.FileInfo, error) {
	if isPostgresURL(path) {
		return nil, nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("look at the database file: %w", err)
	}
	return info, nil
}

// checkFile refuses to serve a request, with a *fileMovedError, when the
// file at --db is no longer the one the page opened (s.file). A file that
// is put in its place between this look and the write it guards is not
// caught.
func (s *uiServer) checkFile() error {
	if s.file == nil {
		return nil
	}
	now, err := os.Stat(s.db.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &fileMovedError{path: s.db.path, removed: true}
	case err != nil:
		return fmt.Errorf("look at the database file: %w", err)
	case !os.SameFile(s.file, now):
		return &fileMovedError{path: s.db.path}
	}
	return nil
}
