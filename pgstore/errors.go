package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
	"github.com/turnframe/turnframe"
)

// The SQLSTATE codes the store acts on.
const (
	codeUniqueViolation      = "23505"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeLockNotAvailable     = "55P03"
	codeQueryCanceled        = "57014" // a cancel request (a late one of Open's handler) or statement_timeout
	codeNoSuchStatement      = "26000" // invalid_sql_statement_name: a statement pgx cached is gone from the session (DEALLOCATE ALL, DISCARD ALL)
	codeReadOnly             = "25006" // read_only_sql_transaction: a hot standby, default_transaction_read_only
	codeCannotConnectNow     = "57P03" // cannot_connect_now: the server is starting up, shutting down or recovering
	codeUntranslatable       = "22P05" // untranslatable_character
	codeBadEncoding          = "22021" // character_not_in_repertoire: a NUL byte in text
	classInsufficient        = "53"    // insufficient_resources: disk full, out of memory, too many connections
)

// translate turns a driver error into the error the caller can act on: a
// cancelled or expired context is that context error; a unique violation is
// turnframe.ErrConflict; a serialization failure, a deadlock or a lock
// refused is turnframe.ErrBusy (retryable tells the transaction loop to run
// it again first), and so is a statement pgx had prepared on the session that
// the session no longer holds (26000: the application ran DEALLOCATE ALL
// or DISCARD ALL on a pooled connection; pgx forgets the statement with the
// error, so the next try prepares it again), and so is a refusal for want of resources (class 53: a
// full disk, too many connections), and a write refused because the
// session is read-only (25006: a hot standby reached during a failover,
// before its promotion; a database an operator froze with
// default_transaction_read_only), and a connection the server refuses for
// now (57P03: it is starting up, shutting down or recovering; at Open, as
// once open); a string PostgreSQL cannot keep in text
// (a NUL byte) is turnframe.ErrInvalid; a closed pool is
// turnframe.ErrClosed; a connection that could not be opened, or that broke
// before the transaction's COMMIT was sent (errConnLost: the server rolled
// it back), is turnframe.ErrBusy (one that broke during the COMMIT is
// what the server says became of it, commitOutcome, or, when it cannot
// tell, not: its outcome is unknown). The driver's error stays in the chain. Errors
// that are already turnframe's pass unchanged, and so does an App
// function's (turnframe.ErrAppWrite): an app's unique violation is not
// ErrConflict.
func translate(ctx context.Context, err error) error {
	if err == nil {
		return err
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		// An App's statement the context cut fails on the server (57014,
		// Open's cancel request), not with pgx's context error.
		return fmt.Errorf("%w: %w", cerr, err)
	}
	if errors.Is(err, turnframe.ErrAppWrite) {
		return err
	}
	if errors.Is(err, puddle.ErrClosedPool) && !errors.Is(err, turnframe.ErrClosed) {
		return fmt.Errorf("%w: %w", turnframe.ErrClosed, err)
	}
	if errors.Is(err, errConnLost) && !errors.Is(err, turnframe.ErrBusy) {
		return fmt.Errorf("%w: %w", turnframe.ErrBusy, err)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || errors.Is(err, turnframe.ErrConflict) || errors.Is(err, turnframe.ErrBusy) ||
		errors.Is(err, turnframe.ErrInvalid) {
		return err // not the server's, or translated already
	}
	switch pe.Code {
	case codeUniqueViolation:
		return fmt.Errorf("%w: %w", turnframe.ErrConflict, err)
	case codeBadEncoding, codeUntranslatable:
		return fmt.Errorf("%w: a string PostgreSQL cannot store as text: %w", turnframe.ErrInvalid, err)
	case codeCannotConnectNow:
		return fmt.Errorf("%w: the server takes no connection now: %w", turnframe.ErrBusy, err)
	}
	if strings.HasPrefix(pe.Code, classInsufficient) {
		return fmt.Errorf("%w: the server lacks a resource (%s): %w", turnframe.ErrBusy, lacking(pe.Code), err)
	}
	if rolledBack(err) {
		return fmt.Errorf("%w: %w", turnframe.ErrBusy, err)
	}
	return err
}

// rolledBack reports whether err, met under a live context, ended its
// transaction for a cause that may pass, so that the same call may be tried
// again: a lost connection; a wait for a lock past lock_timeout, a deadlock
// broken, a serialization refused; a statement cut by a cancel that was not
// the caller's (57014: statement_timeout, an operator's pg_cancel_backend);
// the server short of a resource (class 53); a write the session may not
// make now, being read-only (25006). An error answered in a transaction,
// even to its COMMIT, rolls it back.
func rolledBack(err error) bool {
	if errors.Is(err, errConnLost) {
		return true
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case codeSerializationFailure, codeDeadlockDetected, codeLockNotAvailable, codeQueryCanceled, codeNoSuchStatement, codeReadOnly:
		return true
	}
	return strings.HasPrefix(pe.Code, classInsufficient)
}

// retryable reports whether err ended a transaction that may be run again
// as it was: PostgreSQL broke a deadlock, or refused a serialization, or
// did not find a statement pgx had prepared on the session (it is
// prepared again on the next try).
func retryable(err error) bool {
	if errors.Is(err, errConnLost) {
		return true
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == codeSerializationFailure || pe.Code == codeDeadlockDetected || pe.Code == codeNoSuchStatement)
}

// lacking names the resource a class 53 error says the server ran out of.
func lacking(code string) string {
	switch code {
	case "53100":
		return "is its disk full?"
	case "53200":
		return "memory, or slots in its lock table: a write takes a lock per case and per order key it names; see max_locks_per_transaction"
	case "53300":
		return "connections: see max_connections"
	}
	return "a limit of its configuration"
}
