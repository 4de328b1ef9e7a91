package main

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/turnframe/turnframe/schema"
	"github.com/turnframe/turnframe/sqlitestore"
)

func migrateCommand() *command {
	return &command{
		name:    "migrate",
		summary: "apply the schema to a database file (creates it if missing)",
		help: `Applies every turnframe migration the file does not have yet, creating the
file if it does not exist, and prints the schema version. The one operator
command that may create a file. A file that is not a SQLite database is
refused.`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			path := fs.String("db", "", "the database `file` (required)")
			busy := fs.Duration("busy-timeout", sqlitestore.DefaultBusyTimeout, "how long to wait while another connection holds the write lock")
			return func(ctx context.Context, e *env, args []string) error {
				if err := noArgs(args); err != nil {
					return err
				}
				if *path == "" {
					return usagef("--db is required")
				}
				store, err := sqlitestore.Open(ctx, *path, sqlitestore.WithBusyTimeout(*busy))
				if err != nil {
					return describeBusy(err, *busy)
				}
				defer store.Close()
				v, err := fileSchemaVersion(ctx, store)
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "%s: schema version %d\n", store.Path(), v)
				return nil
			}
		},
	}
}

// fileSchemaVersion is the highest migration applied to the store's file.
func fileSchemaVersion(ctx context.Context, store *sqlitestore.Store) (int64, error) {
	var v int64
	err := store.ReadDB().QueryRowContext(ctx,
		"SELECT coalesce(max(version_id), 0) FROM "+schema.VersionTable+" WHERE is_applied").Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("read the schema version: %w", err)
	}
	return v, nil
}

// embeddedSchemaVersion is the highest migration this binary carries.
func embeddedSchemaVersion() int64 {
	var latest int64
	_ = fs.WalkDir(schema.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".sql") {
			return nil
		}
		name := d.Name()
		digits, _, _ := strings.Cut(name, "_")
		if n, err := strconv.ParseInt(digits, 10, 64); err == nil && n > latest {
			latest = n
		}
		return nil
	})
	return latest
}
