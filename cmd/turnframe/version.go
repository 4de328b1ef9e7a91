package main

import (
	"context"
	"flag"
	"runtime"
	"runtime/debug"
)

func versionCommand() *command {
	return &command{
		name:    "version",
		summary: "print the version, and with --db the file's schema version",
		help: `Prints the turnframe module version this binary was built from, the Go
version, and the schema version it carries. With --db it also prints the
schema version of that file (which must be a turnframe database).`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			asJSON := fs.Bool("json", false, "print JSON")
			return func(ctx context.Context, e *env, args []string) error {
				if err := noArgs(args); err != nil {
					return err
				}
				v := versionJSON{Version: moduleVersion(), Go: runtime.Version(), Schema: embeddedSchemaVersion()}
				if db.path != "" {
					store, err := db.open(ctx)
					if err != nil {
						return err
					}
					defer store.Close()
					fv, err := fileSchemaVersion(ctx, store)
					if err != nil {
						return err
					}
					v.File, v.FileSchema = store.Path(), &fv
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
					pairs = append(pairs, [2]string{"file", v.File}, [2]string{"file schema", itoa(int(*v.FileSchema))})
				}
				return writeFields(e.stdout, pairs)
			}
		},
	}
}

// versionJSON is what "version --json" prints.
type versionJSON struct {
	Version    string `json:"version"`
	Go         string `json:"go"`
	Schema     int64  `json:"schema"`
	File       string `json:"file,omitempty"`
	FileSchema *int64 `json:"file_schema,omitempty"`
}

// moduleVersion is the turnframe module's version as the build recorded
// it: a tag, a pseudo-version, or "(devel)" for a build inside the module.
func moduleVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	const module = "github.com/turnframe/turnframe"
	if info.Main.Path == module {
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
