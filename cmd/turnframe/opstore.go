package main

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/turnframe/turnframe"
)

// opStore is what the operator commands need of a database: the store, and
// the few reads turnframe.Store has no call for (counts, what is due, the
// ended leases, entries by status, every turn, a turn's account and rows,
// rows per destination). sqliteOps and pgOps implement it; the commands
// never see which. Every read is a plain read that takes no lock a writer
// waits for; every write goes through the store's own calls, each one short
// transaction.
type opStore interface {
	turnframe.Store
	// Name is how output names the database: the file's path, or the
	// PostgreSQL URL without its password.
	Name() string
	// counts counts the outbox rows per status name and the turns per
	// phase name; a status or phase without rows may be absent.
	counts(ctx context.Context) (outbox, turns map[string]int, err error)
	// due says what a claim at now would take, by the claim's rule.
	due(ctx context.Context, now time.Time) (dueSummary, error)
	// endedLeases returns at most limit claims whose lease ended at now,
	// longest ended first, and how many there are.
	endedLeases(ctx context.Context, now time.Time, limit int) ([]turnframe.OutboxID, int, error)
	// entriesIn returns at most limit journal entries in status s,
	// longest in it first, and how many there are.
	entriesIn(ctx context.Context, s turnframe.JournalStatus, limit int) ([]entryRef, int, error)
	// listTurns lists at most limit turns in id order after after (every
	// turn for the zero id), of account only when it is not empty.
	listTurns(ctx context.Context, account turnframe.AccountID, after turnframe.TurnID, limit int) ([]turnframe.TurnPhaseMarker, error)
	// turnAccount returns the account of the turn with this id;
	// ErrNotFound when no turn has it.
	turnAccount(ctx context.Context, turn turnframe.TurnID) (turnframe.AccountID, error)
	// turnOutbox returns the ids of at most limit rows the turn enqueued
	// whose id sorts after after (every row for the zero id), in id order:
	// enqueue order, the turn's writes running one at a time. A cursor row
	// pruned since is no matter: the listing goes on from its id.
	turnOutbox(ctx context.Context, turn turnframe.TurnID, after turnframe.OutboxID, limit int) ([]turnframe.OutboxID, error)
	// destinationCounts counts the rows of the first n destinations (by
	// name) per status, sorted by destination.
	destinationCounts(ctx context.Context, n int) ([]destinationCount, error)
	// outboxBefore returns the id of the row whose id sorts last before
	// id, of account only when it is not empty; the zero id when none. It
	// is where a listing goes on after a cursor row that no longer exists
	// (listOutbox).
	outboxBefore(ctx context.Context, id turnframe.OutboxID, account turnframe.AccountID) (turnframe.OutboxID, error)
	// schemaVersion reads, in one small query, the schema version the
	// database holds now (found) and the one this build reads and writes
	// (want): a long-running command ('ui') checks it before each request,
	// since the application may have migrated the database since it opened.
	schemaVersion(ctx context.Context) (found, want int64, err error)
}

// dueSummary is what a claim would find at one moment: the rows it would
// take, the due rows held behind an earlier row of their order key, and the
// due row it would take first (zero when none).
type dueSummary struct {
	rows, held  int
	oldest      turnframe.OutboxID
	oldestDueAt time.Time
}

// entryRef names a journal entry.
type entryRef struct {
	account turnframe.AccountID
	key     turnframe.IdempotencyKey
}

// destinationCount is how many rows of one destination are in one status.
type destinationCount struct {
	destination string
	status      string
	rows        int
}

// isPostgresURL reports whether --db names a PostgreSQL server rather than
// a file: a postgres:// or postgresql:// URL, its scheme in any case (a
// URL's scheme is case-insensitive: "Postgres://" is one too).
func isPostgresURL(db string) bool {
	scheme, ok := urlScheme(db)
	return ok && (strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql"))
}

// urlScheme returns the scheme of an argument that looks like a URL with an
// authority ("scheme://…"), which a file path never does in practice.
func urlScheme(arg string) (string, bool) {
	scheme, _, ok := strings.Cut(arg, "://")
	if !ok || scheme == "" {
		return "", false
	}
	for i, c := range scheme {
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || !('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return "", false
		}
	}
	return scheme, true
}

// checkFilePath refuses a --db meant as a file that looks like a URL (of a
// scheme turnframe does not read, "mysql://…"): it is not opened or created
// as a file, and the refusal names it with its password masked, as every
// message names a URL. what says what the command takes.
func checkFilePath(path, what string) error {
	scheme, ok := urlScheme(path)
	if !ok {
		return nil
	}
	name := scheme + "://…"
	if u, err := url.Parse(path); err == nil {
		name = redactURL(u.String())
	}
	return usagef("--db %s is a URL, not a database file: %s", name, what)
}
