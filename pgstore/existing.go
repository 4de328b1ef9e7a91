package pgstore

import (
	"context"
	"fmt"

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
// one, which Open would not use.
func DatabaseVersion(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var table *string
	if err := pool.QueryRow(ctx, `SELECT to_regclass(quote_ident(current_schema()) || '.' || quote_ident($1))::text`, VersionTable).Scan(&table); err != nil {
		return 0, fmt.Errorf("pgstore: schema version: %w", translate(ctx, err))
	}
	if table == nil {
		return 0, nil
	}
	var v int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(max(version_id), 0) FROM `+*table).Scan(&v); err != nil {
		return 0, fmt.Errorf("pgstore: schema version: %w", translate(ctx, err))
	}
	return v, nil
}

// checkExisting refuses a database whose schema is not SchemaVersion.
func checkExisting(ctx context.Context, pool *pgxpool.Pool) error {
	v, err := DatabaseVersion(ctx, pool)
	if err != nil {
		return err
	}
	if v != SchemaVersion {
		return &SchemaError{Found: v, Want: SchemaVersion}
	}
	return nil
}
