// Command turnframe plays a runnable demo of the turnframe library and is the
// operator's tool for a turnframe database — a SQLite file or a PostgreSQL
// database — including one that a running application has open.
//
// The demo plays a booking conversation against three misbehaving remotes —
// one that can be asked, one that deduplicates, one that can do neither —
// and proves that every intended effect landed exactly once:
//
//	go run ./cmd/turnframe demo
//
// The operator commands take the database file with --db. They read through
// the store's read pool and write in immediate transactions, so they work
// while the application runs. They open the file as it is: they never create
// it and never migrate it, so running a newer turnframe against a live
// application's file never changes its schema; a file whose schema is older
// or newer than theirs is refused, unchanged. migrate is the one command that
// creates or migrates a file:
//
//	turnframe status  --db app.db                 what needs a person, counts, oldest due row, ended leases, unknowns
//	turnframe outbox  --db app.db --status failed list outbox rows
//	turnframe turns   --db app.db --unfinished    list turns recovery still has to finish
//	turnframe show    --db app.db ID              one outbox row, or a turn with its journal and events; its history
//	turnframe history --db app.db ID              the audit trail of a row or a turn (--account A KEY: of a command)
//	turnframe settle  --db app.db ID completed    settle an outcome_unknown or needs_intervention row (--account A KEY: a command)
//	turnframe requeue --db app.db ID              send a failed row again, with a fresh attempt budget
//	turnframe release --db app.db                 mark claims whose lease ended outcome_unknown
//	turnframe release --db app.db --force ID...   put rows back to pending whatever their lease (they may be sent twice)
//	turnframe prune   --db app.db --older-than 30d delete finished rows (never a key)
//	turnframe ui      --db app.db                 a local web page of all the above, with settle/requeue/approve buttons
//	turnframe migrate --db app.db                 bring the schema up to date (may create the file)
//	turnframe version [--db app.db]
//
// Every operator command takes a PostgreSQL URL in place of the file
// (--db postgres://user@host/db?search_path=schema): it opens the schema
// as it is (pgstore.WithExisting), reads with plain statements under a
// statement_timeout, writes through the store in short transactions whose
// row locks wait at most --busy-timeout (lock_timeout), and never prints the
// URL's password. migrate applies pgstore's migrations there.
//
// Every listing takes --json for scripts; otherwise it prints aligned
// columns, in which a value holding a control or format character, or a
// rune drawn as nothing, prints as a quoted Go string. "turnframe help CMD" or "turnframe CMD -h" describes a command.
//
// Ctrl-C stops a command where it stands (a write it had not made is not
// made) and says so; a second Ctrl-C ends it at once, whatever it still
// waits for.
//
// Exit status: 0 on success; 1 when the command could not be done now (the
// database stayed busy past --busy-timeout, an I/O error) or the demo found a
// discrepancy; 2 when the request cannot succeed as given (a bad flag or
// argument, an unknown id, a row in the wrong status for the command, a file
// that is not a turnframe database, a PostgreSQL database its server does
// not have, a login it refuses or a privilege the role lacks, or a schema
// older — run migrate — or newer than this turnframe's); 3 when a command
// that writes made its change but could not write what it did (stdout on
// a full disk): the change stands, and the message says how to look at it
// — running the command again would be refused, or do it twice.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/turnframe/turnframe"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	// The first Ctrl-C ends ctx, which every command stops on. Should the
	// command still wait where ctx does not reach (a write to a pipe no one
	// reads, the ui server's grace period, a COMMIT's outcome asked for),
	// a second must not be swallowed too: the signal gets its default
	// back, and the second ends the process.
	unwatch := context.AfterFunc(ctx, func() {
		stop()
		fmt.Fprintln(os.Stderr, "turnframe: interrupted, stopping; Ctrl-C again ends it at once")
	})
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	unwatch()
	stop()
	os.Exit(code)
}

// The exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // could not be done now, or the demo found a discrepancy
	exitUsage   = 2 // cannot succeed as given
	// exitUnreported: a command that writes made its change, and could not
	// write its confirmation (unreportedError).
	exitUnreported = 3
)

// env is what a command runs with: its output streams and its clock.
type env struct {
	stdout io.Writer
	stderr io.Writer
	now    func() time.Time
	// page is how many rows a listing reads from the store at a time, and
	// so the most it holds at once; 0 means listPage. Tests page with
	// small pages.
	page int
	// server is the PostgreSQL database the command opened, if any: its
	// errors are worded for the operator and its password is never shown
	// (explain).
	server *serverRef
}

// serverRef is the PostgreSQL URL a command opened.
type serverRef struct{ url string }

// explain words err for the operator when the command opened a PostgreSQL
// database (describeServer), and takes the URL's password out of its text.
// Without one it returns err as it is.
func (e *env) explain(err error) error {
	if err == nil || e.server == nil {
		return err
	}
	err = describeServer(err, redactURL(e.server.url))
	return &redactedError{err: err, msg: redactText(err.Error(), e.server.url)}
}

// redactedError is err with a message from which a secret was taken out;
// err stays in the chain, for errors.Is.
type redactedError struct {
	err error
	msg string
}

func (r *redactedError) Error() string { return r.msg }
func (r *redactedError) Unwrap() error { return r.err }

// run runs the command line args (without the program name) and returns the
// exit status. It is main without os.Exit, for tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runEnv(ctx, &env{stdout: stdout, stderr: stderr, now: time.Now}, args)
}

func runEnv(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		printUsage(e.stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return runHelp(e, rest)
	}
	cmd := lookup(name)
	if cmd == nil {
		fmt.Fprintf(e.stderr, "turnframe: unknown command %q\n\n", name)
		printUsage(e.stderr)
		return exitUsage
	}
	err := cmd.run(ctx, e, rest)
	return report(e.stderr, cmd.name, e.explain(err))
}

// report prints err, if any, and returns the exit status it calls for.
func report(stderr io.Writer, name string, err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errHelpShown):
		return exitOK
	case errors.Is(err, errUsageShown):
		return exitUsage
	}
	fmt.Fprintf(stderr, "turnframe %s: %v\n", name, err)
	var unreported *unreportedError
	if errors.As(err, &unreported) {
		return exitUnreported // done: confirmation.doneWith never joins it to a failure
	}
	if exitCode(err) == exitUsage {
		var u *usageError
		if errors.As(err, &u) {
			fmt.Fprintf(stderr, "run 'turnframe %s -h' for help\n", name)
		}
		return exitUsage
	}
	return exitFailure
}

// exitCode maps an error to an exit status: exitUsage for what cannot succeed
// as given, exitFailure for the rest.
func exitCode(err error) int {
	var u *usageError
	switch {
	case errors.As(err, &u),
		errors.Is(err, turnframe.ErrNotFound),
		errors.Is(err, turnframe.ErrInvalid),
		errors.Is(err, turnframe.ErrConflict):
		return exitUsage
	}
	return exitFailure
}

// usageError is a bad flag or argument, found before anything was opened.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errHelpShown and errUsageShown end a command whose help or flag error the
// flag package has already printed.
var (
	errHelpShown  = errors.New("help shown")
	errUsageShown = errors.New("usage shown")
)
