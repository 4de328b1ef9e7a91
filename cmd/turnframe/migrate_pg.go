package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// pgPool connects to the database at rawURL with the operator's connection
// settings (pgURL). The caller closes it.
func pgPool(ctx context.Context, rawURL string, busy time.Duration) (*pgxpool.Pool, error) {
	u, err := pgURL(rawURL, busy)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		return nil, usagef("--db: not a PostgreSQL URL (%s)", redactText(oneLine(err), rawURL))
	}
	return pool, nil
}

// pgSchemaVersion reads the turnframe schema version of the database at
// rawURL, changing nothing: 0 without the schema.
func pgSchemaVersion(ctx context.Context, rawURL string, busy time.Duration) (int64, error) {
	pool, err := pgPool(ctx, rawURL, busy)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	v, err := pgstore.DatabaseVersion(ctx, pool)
	if err != nil {
		return 0, describeServer(err, redactURL(rawURL))
	}
	return v, nil
}

// migratePG applies pgstore's migrations to the database at rawURL (the
// first schema of its search_path) and says what it did: each migration is
// one transaction, under goose's advisory lock, so an application starting
// at the same time is safe. A database written by a newer turnframe is
// refused, unchanged; so is a role that may not create tables there, with
// what to do.
func migratePG(ctx context.Context, e *env, rawURL string, busy time.Duration) error {
	e.server = &serverRef{url: rawURL}
	name := redactURL(rawURL)
	pool, err := pgPool(ctx, rawURL, busy)
	if err != nil {
		return err
	}
	defer pool.Close()
	before, err := pgstore.DatabaseVersion(ctx, pool)
	if err != nil {
		return describeServer(err, name)
	}
	if before > pgstore.SchemaVersion {
		return &openError{err: turnframe.ErrInvalid, msg: fmt.Sprintf("%s holds the turnframe schema version %d, "+
			"written by a newer turnframe (this one knows up to version %d); it was left unchanged. "+
			"Use that newer turnframe", name, before, pgstore.SchemaVersion)}
	}
	store, err := pgstore.New(ctx, pool)
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == codeInsufficientPriv:
		return &openError{err: fmt.Errorf("%w: %w", turnframe.ErrInvalid, err), msg: fmt.Sprintf("the role of %s may not change "+
			"the schema there (%s); the migrations that had committed stay, the rest were not applied. Run 'turnframe migrate' "+
			"as a role that owns the schema, or let the application's Open migrate", name, pe.Message)}
	case errors.As(err, &pe) && (pe.Code == codeDuplicateTable || pe.Code == codeDuplicateObject):
		// Another application's table or index of the same name: every
		// try fails on it, so it is no matter of trying again.
		return &openError{err: fmt.Errorf("%w: %w", turnframe.ErrInvalid, err), msg: fmt.Sprintf("the schema of %s refused "+
			"turnframe's (%s): does another application keep tables of the same names there? The migrations that had "+
			"committed stay, the rest were not applied. Pick a schema of turnframe's own with ?search_path=NAME",
			name, pe.Message)}
	case err != nil:
		return describeBusy(describeServer(err, name), busy)
	}
	store.Close() // leaves the pool, which is ours
	after, err := pgstore.DatabaseVersion(ctx, pool)
	if err != nil {
		return describeServer(err, name)
	}
	out := confirm(e, "'turnframe version --db URL'")
	switch {
	case before == 0:
		fmt.Fprintf(out, "%s: created the turnframe schema, version %d\n", name, after)
	case before == after:
		fmt.Fprintf(out, "%s: schema version %d, already current\n", name, after)
	default:
		fmt.Fprintf(out, "%s: schema version %d (was %d)\n", name, after, before)
	}
	return out.done()
}
