package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
	"github.com/turnframe/turnframe/schema"
)

func versionCommand() *command {
	return &command{
		name:    "version",
		summary: "print the version, and with --db the file's schema version",
		help: `Prints the turnframe module version this binary was built from, the Go
version, and the schema version it reads and writes. With --db it also
prints the schema version of that file or PostgreSQL database, read
read-only — also when it is older or newer than this turnframe's, which the
other commands refuse — and says what to do about a difference. A file or
database that is not a turnframe database is an error (exit 2).`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			fs.Lookup("db").Usage = "also read the schema version of this `file` or postgres:// URL"
			asJSON := fs.Bool("json", false, "print JSON")
			return func(ctx context.Context, e *env, args []string) error {
				if err := noArgs(args); err != nil {
					return err
				}
				if db.path != "" {
					// It reads the database as every command does: the
					// same bound on how long it waits for it.
					if err := db.checkBusy(); err != nil {
						return err
					}
				}
				v := versionJSON{Version: moduleVersion(), Go: runtime.Version(), Schema: schema.Version}
				if isPostgresURL(db.path) {
					e.server = &serverRef{url: db.path}
					dbv, err := pgSchemaVersion(ctx, db.path, db.busy)
					if err != nil {
						return err
					}
					if dbv == 0 {
						return fmt.Errorf("%s holds no turnframe schema: %w", redactURL(db.path), turnframe.ErrNotFound)
					}
					v.File, v.FileSchema, v.Schema = redactURL(db.path), &dbv, pgstore.SchemaVersion
				} else if db.path != "" {
					if err := checkFilePath(db.path, dbTakes); err != nil {
						return err
					}
					f, err := inspect(ctx, db.path, db.busy)
					var refusal *openError
					switch {
					case errors.Is(err, turnframe.ErrBusy):
						return describeBusy(err, db.busy)
					case errors.As(err, &refusal):
						return fmt.Errorf("%s is not a turnframe database; it was left unchanged: %w", db.path, err)
					case err != nil:
						// Not a verdict on the file: a read that failed for a
						// reason of the moment (Ctrl-C, I/O, permissions).
						return err
					case !f.exists:
						return fmt.Errorf("no turnframe database at %s (nothing was created): %w", db.path, turnframe.ErrNotFound)
					case f.version == 0:
						return fmt.Errorf("%s is not a turnframe database; it was left unchanged: %w", db.path, turnframe.ErrInvalid)
					}
					v.File, v.FileSchema = db.path, &f.version
				}
				if *asJSON {
					return writeJSON(e.stdout, v)
				}
				pairs := [][2]string{
					{"turnframe", v.Version},
					{"go", v.Go},
					{"schema", itoa(int(v.Schema))},
				}
				if v.FileSchema != nil {
					pairs = append(pairs, [2]string{"file", v.File}, [2]string{"file schema", fileSchemaText(*v.FileSchema, v.Schema)})
				}
				return writeFields(e.stdout, pairs)
			}
		},
	}
}

// fileSchemaText is a database's schema version and what to do when it is
// not want, this build's.
func fileSchemaText(v, want int64) string {
	switch {
	case v < want:
		return fmt.Sprintf("%d (older: run 'turnframe migrate' before the other commands can open it)", v)
	case v > want:
		return fmt.Sprintf("%d (newer: written by a newer turnframe; use that one)", v)
	}
	return fmt.Sprintf("%d (current)", v)
}

// versionJSON is what "version --json" prints.
type versionJSON struct {
	Version    string `json:"version"`
	Go         string `json:"go"`
	Schema     int64  `json:"schema"`
	File       string `json:"file,omitempty"`
	FileSchema *int64 `json:"file_schema,omitempty"`
}

// moduleVersion is the version of the module this command was built from,
// as the build recorded it: a tag, a pseudo-version, or "(devel)" for a
// build inside the repository. The command is its own module
// (github.com/turnframe/turnframe/cmd/turnframe), tagged with the root.
func moduleVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	const module = "github.com/turnframe/turnframe"
	if info.Main.Path == module || info.Main.Path == module+"/cmd/turnframe" {
		v := info.Main.Version
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " " + s.Value[:12]
			}
		}
		return v
	}
	for _, dep := range info.Deps {
		if dep.Path == module {
			return dep.Version
		}
	}
	return "unknown"
}
