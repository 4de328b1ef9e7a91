package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// dbFlags are the flags every operator command opens the database with.
type dbFlags struct {
	path string
	busy time.Duration
}

// addDBFlags registers --db and --busy-timeout on fs.
func addDBFlags(fs *flag.FlagSet) *dbFlags {
	d := &dbFlags{}
	fs.StringVar(&d.path, "db", "", "the turnframe database `file` (required)")
	fs.DurationVar(&d.busy, "busy-timeout", sqlitestore.DefaultBusyTimeout,
		"how long a write waits while another connection holds the database's write lock")
	return d
}

// open opens the existing turnframe database named by --db. It never creates
// or changes a file that is not one: a missing file, a file that is not
// SQLite, or a SQLite file without the turnframe schema is an error that
// exits 2, and the file is left as it was.
func (d *dbFlags) open(ctx context.Context) (*sqlitestore.Store, error) {
	if d.path == "" {
		return nil, usagef("--db is required")
	}
	if d.busy < time.Millisecond {
		return nil, usagef("--busy-timeout must be at least 1ms")
	}
	store, err := sqlitestore.Open(ctx, d.path, sqlitestore.WithExisting(), sqlitestore.WithBusyTimeout(d.busy))
	switch {
	case err == nil:
		return store, nil
	case errors.Is(err, turnframe.ErrNotFound):
		return nil, fmt.Errorf("no turnframe database at %s (nothing was created; 'turnframe migrate' makes one): %w", d.path, err)
	case errors.Is(err, turnframe.ErrInvalid):
		return nil, fmt.Errorf("%s is not a turnframe database; it was left unchanged: %w", d.path, err)
	}
	return nil, describeBusy(err, d.busy)
}

// describeBusy says what a busy database means for the operator.
func describeBusy(err error, busy time.Duration) error {
	if errors.Is(err, sqlitestore.ErrBusy) {
		return fmt.Errorf("the database stayed locked by another writer for the whole --busy-timeout (%v); nothing was changed, try again: %w", busy, err)
	}
	return err
}

// ageFlag is a non-negative duration flag that also takes days ("30d").
type ageFlag struct {
	d   time.Duration
	set bool
}

func (a *ageFlag) String() string {
	if a == nil || !a.set {
		return ""
	}
	return a.d.String()
}

// Set parses a Go duration ("90m", "1h30m") or a number of days ("7d").
func (a *ageFlag) Set(s string) error {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || math.IsNaN(n) || n < 0 || n > 100*365 {
			return fmt.Errorf("%q is not a number of days", s)
		}
		d = time.Duration(n * float64(24*time.Hour))
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return fmt.Errorf("%q is not a duration (like 90s, 15m, 2h or 30d)", s)
		}
	}
	if d < 0 {
		return fmt.Errorf("%q is negative", s)
	}
	a.d, a.set = d, true
	return nil
}

// parseOutboxID parses an outbox row id argument.
func parseOutboxID(args []string, what string) (turnframe.OutboxID, error) {
	if len(args) == 0 {
		return turnframe.OutboxID{}, usagef("missing %s", what)
	}
	id, err := turnframe.ParseOutboxID(args[0])
	if err != nil {
		return turnframe.OutboxID{}, usagef("%q is not an id (26 characters, like 01J9Z3…)", args[0])
	}
	return id, nil
}

// noArgs is the usage error for positional arguments a command does not take.
func noArgs(args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	return nil
}
