package main

import (
	"context"
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
	// turnOutbox returns the ids of at most limit rows the turn enqueued,
	// in enqueue order.
	turnOutbox(ctx context.Context, turn turnframe.TurnID, limit int) ([]turnframe.OutboxID, error)
	// destinationCounts counts the rows of the first n destinations (by
	// name) per status, sorted by destination.
	destinationCounts(ctx context.Context, n int) ([]destinationCount, error)
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
// a file: a postgres:// or postgresql:// URL.
func isPostgresURL(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}
