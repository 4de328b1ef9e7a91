package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe/pgstore"
)

// migrate on PostgreSQL that made the schema and could not write its
// confirmation says the change was made (exitUnreported), as on a file.
func TestPGAMigrateWhoseConfirmationCannotBeWrittenSaysItWasDone(t *testing.T) {
	is := is.New(t)
	db := pgSchema(t)
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"migrate", "--db", db}, fullDisk{}, &stderr)
	t.Log(stderr.String())
	is.Equal(code, exitUnreported)                                    // done, unreported
	is.True(strings.Contains(stderr.String(), "the change was made")) // says it was done
	store, err := pgstore.Open(context.Background(), db, pgstore.WithExisting())
	is.NoErr(err) // the schema was made
	store.Close()
}
