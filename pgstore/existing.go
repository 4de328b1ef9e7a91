package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/turnframe/turnframe"
)

// WithExisting makes Open and New use the schema as it is: they apply no
// migration and change nothing, and refuse a database whose turnframe
// schema is missing, older or newer than this build's with a *SchemaError.
// For operator tools, which must never migrate a live application's
// database behind its back (Migrate is theirs to call, on purpose).
func WithExisting() Option {
	return func(c *config) { c.existing = true }
}

// SchemaError is the refusal of a store opened WithExisting on a database
// whose schema is not this build's. It wraps turnframe.ErrNotFound when the
// database has no turnframe schema (in the first schema of its
// search_path), turnframe.ErrInvalid when its version is another.
type SchemaError struct {
	Found int64 // the database's schema version; 0 without the schema
	Want  int64 // SchemaVersion
}

func (e *SchemaError) Error() string {
	switch {
	case e.Found == 0:
		return "no turnframe schema in the database (the first schema of its search_path)"
	case e.Found < e.Want:
		return fmt.Sprintf("the database's turnframe schema is at version %d, older than this build's %d", e.Found, e.Want)
	}
	return fmt.Sprintf("the database's turnframe schema is at version %d, newer than this build's %d", e.Found, e.Want)
}

// Unwrap returns turnframe.ErrNotFound for a missing schema, else
// turnframe.ErrInvalid.
func (e *SchemaError) Unwrap() error {
	if e.Found == 0 {
		return turnframe.ErrNotFound
	}
	return turnframe.ErrInvalid
}

// DatabaseVersion returns the turnframe schema version of the database q
// connects to (the first schema of its search_path, current_schema(),
// where Migrate creates the tables), reading only: 0 when it holds no
// turnframe schema — also when a later schema of the search_path holds
// one, which Open would not use. A connection that cannot be opened, or
// that the server ends under the read, is turnframe.ErrBusy.
func DatabaseVersion(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var schema string
	if err := (readPool{pool}).QueryRow(ctx, `SELECT coalesce(current_schema(), '')`).Scan(&schema); err != nil {
		return 0, fmt.Errorf("pgstore: schema version: %w", translate(ctx, err))
	}
	return schemaVersion(ctx, pool, schema)
}

// schemaVersion returns the turnframe schema version of schema: 0 when it
// holds no turnframe schema (or is "").
func schemaVersion(ctx context.Context, pool *pgxpool.Pool, schema string) (int64, error) {
	var exists bool
	if err := (readPool{pool}).QueryRow(ctx, `SELECT to_regclass(quote_ident($1) || '.' || quote_ident($2)) IS NOT NULL`, schema, VersionTable).Scan(&exists); err != nil {
		return 0, fmt.Errorf("pgstore: schema version: %w", translate(ctx, err))
	}
	if !exists {
		return 0, nil
	}
	// Named by schema here: regclass's text leaves out a schema the
	// session's search_path shows, and the next statement may run on
	// another pooled session.
	var v int64
	if err := (readPool{pool}).QueryRow(ctx, `SELECT coalesce(max(version_id), 0) FROM `+pgx.Identifier{schema, VersionTable}.Sanitize()).Scan(&v); err != nil {
		return 0, fmt.Errorf("pgstore: schema version: %w", translate(ctx, err))
	}
	return v, nil
}

// checkExisting returns the schema New finds (current_schema()), and
// refuses it when its version is not SchemaVersion.
func checkExisting(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var schema string
	if err := (readPool{pool}).QueryRow(ctx, `SELECT coalesce(current_schema(), '')`).Scan(&schema); err != nil {
		return "", fmt.Errorf("pgstore: schema version: %w", translate(ctx, err))
	}
	v, err := schemaVersion(ctx, pool, schema)
	if err != nil {
		return "", err
	}
	if v != SchemaVersion {
		return "", &SchemaError{Found: v, Want: SchemaVersion}
	}
	return schema, nil
}
