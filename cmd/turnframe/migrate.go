package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/schema"
	"github.com/turnframe/turnframe/sqlitestore"
)

func migrateCommand() *command {
	return &command{
		name:    "migrate",
		summary: "bring a database file's schema up to this turnframe's (creates the file if missing)",
		help: `Applies every turnframe migration the file does not have yet, creating the
file if it does not exist (never its directory: a missing one is refused,
exit 2), and prints its schema version before and after.
It is the one operator command that changes a schema or creates a file:
every other command opens the file as it is and refuses one whose schema is
older or newer than its own. Each migration is one transaction, and every
row is kept. A file that is not a SQLite database, one written by a
newer turnframe, and another application's file holding a table or index
named like one of turnframe's are refused (exit 2) and left unchanged.

With a postgres:// URL it applies pgstore's migrations to the first schema of
the URL's search_path (?search_path=NAME picks another), each in its own
transaction under an advisory lock, so an application starting at the same
time is safe. A role that may not create tables there, and a schema where
another application keeps a table named like one of turnframe's, are
refused with what to do (exit 2); the migrations that had committed stay.`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			path := fs.String("db", "", "the database `file`, or a postgres:// URL (required)")
			busy := fs.Duration("busy-timeout", sqlitestore.DefaultBusyTimeout, "how long to wait while another connection holds the write lock")
			return func(ctx context.Context, e *env, args []string) error {
				if err := noArgs(args); err != nil {
					return err
				}
				if *path == "" {
					return usagef("--db is required")
				}
				if *busy < time.Millisecond {
					return usagef("--busy-timeout must be at least 1ms")
				}
				if isPostgresURL(*path) {
					return migratePG(ctx, e, *path, *busy)
				}
				if err := checkFilePath(*path, dbTakes); err != nil {
					return err
				}
				if err := newFileDir(*path); err != nil {
					return err
				}
				// Look before the driver does: it would take a file that is
				// not SQLite for a corrupt database and fail with its own
				// words, and one it can open it may write to.
				before, err := inspect(ctx, *path, *busy)
				var refusal *openError
				if errors.As(err, &refusal) {
					return &openError{msg: refusal.msg + "; migrate refused it and left it unchanged", err: err}
				}
				if err != nil {
					return describeBusy(err, *busy)
				}
				if before.version > schema.Version {
					return &openError{err: turnframe.ErrInvalid, msg: fmt.Sprintf("%s holds the turnframe schema version %d, "+
						"written by a newer turnframe (this one knows up to version %d); it was left unchanged. "+
						"Use that newer turnframe", *path, before.version, schema.Version)}
				}
				if len(before.clashes) > 0 {
					return &openError{err: turnframe.ErrInvalid, msg: fmt.Sprintf("%s holds no turnframe schema, and %s, "+
						"named like turnframe's own, which a migration would fail on half way: is it another application's "+
						"file? It was left unchanged", *path, strings.Join(before.clashes, ", "))}
				}
				store, err := sqlitestore.Open(ctx, *path, sqlitestore.WithBusyTimeout(*busy))
				if err != nil {
					return describeBusy(err, *busy)
				}
				defer store.Close()
				v, err := schema.FileVersion(ctx, store.ReadDB())
				if err != nil {
					return fmt.Errorf("read the schema version: %w", err)
				}
				out := confirm(e, "'turnframe version --db "+*path+"'")
				switch {
				case !before.exists:
					fmt.Fprintf(out, "%s: created, schema version %d\n", store.Path(), v)
				case before.version == v:
					fmt.Fprintf(out, "%s: schema version %d, already current\n", store.Path(), v)
				default:
					fmt.Fprintf(out, "%s: schema version %d (was %d)\n", store.Path(), v, before.version)
				}
				return out.done()
			}
		},
	}
}
