package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// copyFile copies the file at from to to, as a backup is taken.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// A page serves the file it opened. Once the file at --db is another (a
// backup restored over it, renamed into place) or gone, the page holds an
// unlinked file nobody else reads: a settle made there was answered
// "settled" and reached no application. Every page and write now refuses
// (503) with what happened and what to do, nothing written.
func TestThePageRefusesADatabaseFileReplacedOrRemovedUnderIt(t *testing.T) {
	for _, c := range []struct {
		name string
		move func(t *testing.T, f fixture, backup string)
		says string
	}{
		{"RestoredFromABackup", func(t *testing.T, f fixture, backup string) {
			if err := os.Rename(backup, f.path); err != nil {
				t.Fatal(err)
			}
		}, "another was put in its place"},
		{"Removed", func(t *testing.T, f fixture, _ string) {
			if err := os.Remove(f.path); err != nil {
				t.Fatal(err)
			}
		}, "was removed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			is := is.New(t)
			f := mustFixture(t)
			backup := f.path + ".backup"
			copyFile(t, f.path, backup) // the fixture's store is closed: the file is whole
			u := newTestUI(t, f, false)
			token := u.pageToken() // the page serves the file…
			c.move(t, f, backup)   // …until the file at its path is another, or none

			code, body := u.get("/")
			is.Equal(code, http.StatusServiceUnavailable) // the page refuses to show a file nobody else reads
			is.True(strings.Contains(body, c.says))       // says what happened
			is.True(strings.Contains(body, "Stop it"))    // and what to do
			form := settleForm(token, f.unknown, "completed", "checked the remote")
			form.Set("attempt", "1")
			code, body = u.post("/settle", form, nil)
			is.Equal(code, http.StatusServiceUnavailable)      // the write is refused…
			is.True(strings.Contains(body, "Nothing changed")) // …saying so
			is.Equal(u.status(f.unknown), turnframe.OutboxOutcomeUnknown)

			if _, err := os.Stat(f.path); err != nil {
				return // removed: no application reads it either
			}
			app, err := sqlitestore.Open(context.Background(), f.path, sqlitestore.WithExisting())
			is.NoErr(err)
			defer app.Close()
			rec, err := app.GetOutbox(context.Background(), f.unknown)
			is.NoErr(err)
			is.Equal(rec.Status, turnframe.OutboxOutcomeUnknown) // the application's file, as restored
		})
	}
}
