package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/schema"
	"github.com/turnframe/turnframe/sqlitestore"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dbFlags are the flags every operator command opens the database with.
type dbFlags struct {
	path string // a file, or a PostgreSQL URL (isPostgresURL)
	busy time.Duration
}

// addDBFlags registers --db and --busy-timeout on fs.
func addDBFlags(fs *flag.FlagSet) *dbFlags {
	d := &dbFlags{}
	fs.StringVar(&d.path, "db", "", "the turnframe database: a `file`, or a postgres:// URL (required)")
	fs.DurationVar(&d.busy, "busy-timeout", sqlitestore.DefaultBusyTimeout,
		"how long a write waits while another connection holds the database's write lock (PostgreSQL: a row's lock, lock_timeout)")
	return d
}

// dbTakes says what --db takes, for a refusal of what it does not.
const dbTakes = "turnframe reads a database file or a postgres:// (postgresql://) URL"

// open opens the turnframe database named by --db as it is: a file with
// sqlitestore.WithExisting, a postgres:// or postgresql:// URL (the scheme
// in any case) with pgstore.WithExisting (openPG); a URL of another scheme
// is refused, its password masked (checkFilePath). It never creates a file
// or a schema, never migrates one, and never changes one it refuses. A missing file, a file
// that is not SQLite, a database without the turnframe schema, and one whose
// schema is older or newer than this build's are errors that exit 2 and say
// what to do; only 'turnframe migrate' (and the application's own Open)
// migrates. For a URL, e is told the URL, so that no output shows its
// password (env.explain).
func (d *dbFlags) open(ctx context.Context, e *env) (opStore, error) {
	if d.path == "" {
		return nil, usagef("--db is required")
	}
	if err := d.checkBusy(); err != nil {
		return nil, err
	}
	if isPostgresURL(d.path) {
		e.server = &serverRef{url: d.path}
		s, err := openPG(ctx, d.path, d.busy, e.now)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	if err := checkFilePath(d.path, dbTakes); err != nil {
		return nil, err
	}
	store, err := sqlitestore.Open(ctx, d.path, sqlitestore.WithExisting(), sqlitestore.WithBusyTimeout(d.busy))
	switch {
	case err == nil:
		return sqliteOps{store}, nil
	case errors.Is(err, turnframe.ErrNotFound):
		return nil, fmt.Errorf("no turnframe database at %s (nothing was created; 'turnframe migrate' makes one): %w", d.path, err)
	case errors.Is(err, turnframe.ErrInvalid):
		return nil, refused(ctx, d.path, d.busy, err)
	}
	return nil, describeBusy(err, d.busy)
}

// refused words why Open refused the file at path (err wraps ErrInvalid):
// a schema older or newer than this build's, or not a turnframe database at
// all. The store's error does not tell the cases apart by type, so the file's
// schema version is read again, read-only (inspect).
func refused(ctx context.Context, path string, busy time.Duration, err error) error {
	f, ierr := inspect(ctx, path, busy)
	switch {
	case ierr == nil && f.version > 0 && f.version < schema.Version:
		return &openError{err: err, msg: fmt.Sprintf("%s holds the turnframe schema version %d, older than version %d, "+
			"which this turnframe reads; it was left unchanged. Run 'turnframe migrate --db %s' to upgrade it "+
			"(or start the upgraded application, whose Open migrates it)", path, f.version, schema.Version, path)}
	case ierr == nil && f.version > schema.Version:
		return &openError{err: err, msg: fmt.Sprintf("%s holds the turnframe schema version %d, written by a newer "+
			"turnframe (this one knows up to version %d); it was left unchanged. Use a turnframe at least as new as "+
			"the application's", path, f.version, schema.Version)}
	}
	if ierr != nil && !errors.Is(ierr, turnframe.ErrBusy) {
		var why *openError
		if errors.As(ierr, &why) {
			// Its own words (a directory, a pipe, not SQLite), never the
			// driver's guess at what it read.
			return fmt.Errorf("%s is not a turnframe database; it was left unchanged: %w", path, why)
		}
		// The file could not be read (a directory this user may not
		// write, a permission, I/O): no verdict on what it holds.
		return fmt.Errorf("%w; it was left unchanged", ierr)
	}
	return fmt.Errorf("%s is not a turnframe database; it was left unchanged: %w", path, err)
}

// newFileDir refuses the path of a file to be created (by migrate, by the
// demo) whose directory does not exist or is not a directory: they create
// the file, never its directory, and no retry makes one (ErrNotFound,
// ErrInvalid: exit 2). Any other failure of the look is left to the create,
// which reports it.
func newFileDir(path string) error {
	dir := filepath.Dir(path)
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("there is no directory %s to create %s in (nothing was created: the file is created, never its directory): %w",
			dir, filepath.Base(path), turnframe.ErrNotFound)
	case errors.Is(err, syscall.ENOTDIR), err == nil && !info.IsDir():
		return fmt.Errorf("%s is not a directory, so no file can be created in it (nothing was created): %w", dir, turnframe.ErrInvalid)
	}
	return nil
}

// fileKind names a file mode that is not a regular file's, for a refusal.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}

// openError is a refusal to open whose message says all the operator needs;
// the store's error stays in the chain, for errors.Is.
type openError struct {
	msg string
	err error
	// denied: the PostgreSQL server refused the command's login or its
	// role's privilege (describeServer). The request was fine; whoever
	// runs the command must run it as another role.
	denied bool
}

func (e *openError) Error() string { return e.msg }
func (e *openError) Unwrap() error { return e.err }

// fileState is what inspect found at a path.
type fileState struct {
	exists  bool  // a file is there (an empty one included)
	sqlite  bool  // it is a SQLite database: it begins with SQLite's header
	version int64 // its turnframe schema version; 0 without the schema
	// clashes are, in a SQLite file without the schema, its objects named
	// like one of turnframe's.
	clashes []string
}

// sqliteHeader is how every SQLite database file begins.
var sqliteHeader = []byte("SQLite format 3\x00")

// inspect reads what is at path without changing a byte of it or leaving a
// file behind: nothing; an empty file; a file that is not SQLite (an error
// wrapping turnframe.ErrInvalid, and the driver never opens it); or a SQLite
// database and its schema version, read with schema.FileVersion through a
// connection that runs no writing statement, waiting up to busy while
// another connection locks the file (then an error wrapping ErrBusy). A
// directory is ErrInvalid too.
func inspect(ctx context.Context, path string, busy time.Duration) (fileState, error) {
	// Stat before opening: an open of a named pipe (a FIFO, a process
	// substitution's /dev/fd/N) blocks in the kernel until someone writes
	// to it, where neither ctx nor Ctrl-C ends it.
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileState{}, nil
	}
	if err != nil {
		return fileState{}, err
	}
	if info.IsDir() {
		return fileState{}, &openError{msg: path + " is a directory, not a database file", err: turnframe.ErrInvalid}
	}
	if !info.Mode().IsRegular() {
		return fileState{}, &openError{msg: fmt.Sprintf("%s is not a regular file (%s), so not a database file", path, fileKind(info.Mode())),
			err: turnframe.ErrInvalid}
	}
	f, err := os.Open(path)
	if err != nil {
		return fileState{}, err
	}
	if info.Size() == 0 {
		f.Close()
		return fileState{exists: true}, nil
	}
	head := make([]byte, len(sqliteHeader))
	_, err = io.ReadFull(f, head)
	f.Close()
	if err != nil || !bytes.Equal(head, sqliteHeader) {
		return fileState{exists: true}, &openError{msg: path + " is not a SQLite database", err: turnframe.ErrInvalid}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fileState{}, err
	}
	// mode=rw: SQLite never creates the file; query_only: no statement
	// writes; busy_timeout: a read waits while a checkpoint resets the WAL.
	// Not mode=ro: a read-only connection to a WAL file that no one else
	// has open creates its -wal and -shm files and cannot remove them when
	// it closes, while this one, the last to close, removes them again, as
	// the store's own check of an existing file does.
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(abs))
	// SQLite's busy_timeout is a 32-bit count of milliseconds: a longer one
	// wraps negative, which SQLite takes for no wait at all (sqlitestore
	// clamps its own the same way).
	ms := strconv.FormatInt(min(busy.Milliseconds(), math.MaxInt32), 10)
	db, err := sql.Open("sqlite", "file:"+esc+"?mode=rw&_pragma=query_only(1)&_pragma=busy_timeout("+ms+")")
	if err != nil {
		return fileState{}, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	v, err := schema.FileVersion(ctx, db)
	var se *sqlite.Error
	if errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_CORRUPT || se.Code()&0xff == sqlite3.SQLITE_NOTADB) {
		// A damaged file is not a database any command can use: no retry mends it.
		return fileState{exists: true}, &openError{msg: path + " is not a readable SQLite database (" + err.Error() + ")", err: turnframe.ErrInvalid}
	}
	if errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_BUSY || se.Code()&0xff == sqlite3.SQLITE_LOCKED) {
		return fileState{}, fmt.Errorf("read the schema version of %s: %w: %w", path, turnframe.ErrBusy, err)
	}
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CANTOPEN {
		// Not a verdict on the file: SQLite could not open it beside the
		// -wal and -shm files a WAL database is read with.
		return fileState{}, fmt.Errorf("could not open %s (%w): SQLite reads a WAL database with its -wal and -shm files "+
			"beside it, and creates them when they are missing, so this user must be able to write the file's directory "+
			"(or the application must have the file open)", path, err)
	}
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_ERROR {
		// A version table of another shape (another program's): no retry mends it.
		return fileState{exists: true}, &openError{msg: path + " is not a turnframe database: its " + schema.VersionTable +
			" table is not turnframe's (" + err.Error() + ")", err: turnframe.ErrInvalid}
	}
	if err != nil {
		return fileState{}, fmt.Errorf("read the schema version of %s: %w", path, err)
	}
	st := fileState{exists: true, sqlite: true, version: v}
	if v == 0 {
		// Without the turnframe schema, note what of its names the file
		// holds already: migrate refuses it before writing a byte.
		if st.clashes, err = schemaClashes(ctx, db); err != nil {
			return fileState{}, fmt.Errorf("read the tables of %s: %w", path, err)
		}
	}
	return st, nil
}

// createdName matches a statement of a migration that creates a table, an
// index, a trigger or a view, and captures its name.
var createdName = regexp.MustCompile(`(?i)\bCREATE\s+(?:UNIQUE\s+)?(?:TABLE|INDEX|TRIGGER|VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?["\x60]?(\w+)`)

// schemaNames returns the names, lower-cased, of the tables, indexes,
// triggers and views turnframe's embedded migrations create.
func schemaNames() map[string]bool {
	names := map[string]bool{}
	files, _ := fs.Glob(schema.FS, "migrations/*.sql")
	for _, name := range files {
		b, _ := fs.ReadFile(schema.FS, name)
		for _, m := range createdName.FindAllStringSubmatch(string(b), -1) {
			names[strings.ToLower(m[1])] = true
		}
	}
	return names
}

// schemaClashes returns the objects of a file without the turnframe schema
// that are named like one turnframe's migrations create: another
// application's, with which migrating would fail half way.
func schemaClashes(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SELECT name FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY name")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var clashes []string
	ours := schemaNames()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		if ours[strings.ToLower(n)] {
			clashes = append(clashes, n)
		}
	}
	return clashes, rows.Err()
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

// maxAgeDays bounds an age given in days: a hundred years.
const maxAgeDays = 100 * 365

// Set parses a Go duration ("90m", "1h30m") or a number of days ("7d").
func (a *ageFlag) Set(s string) error {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || math.IsNaN(n) || n < 0 {
			return fmt.Errorf("%q is not a number of days", s)
		}
		if n > maxAgeDays {
			return fmt.Errorf("%q is more than %d days (a hundred years, further back than any row)", s, maxAgeDays)
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

// noRow words a failed read of the outbox row id before a write: "no outbox
// row" only when there is none (turnframe.ErrNotFound); any other error (a
// busy or unreachable database) says the row could not be read, so the
// operator retries rather than look for a typo or a prune.
func noRow(id turnframe.OutboxID, err error) error {
	if errors.Is(err, turnframe.ErrNotFound) {
		return fmt.Errorf("no outbox row %s: %w", id, err)
	}
	return fmt.Errorf("could not read outbox row %s; nothing was changed: %w", id, err)
}

// noEntry is noRow for the journal entry an account admitted under key.
func noEntry(account turnframe.AccountID, key turnframe.IdempotencyKey, err error) error {
	return entryReadErr(account, key, "; nothing was changed", err)
}

// unreadEntry is noEntry for a command or page that only reads, and so has
// nothing to leave unchanged.
func unreadEntry(account turnframe.AccountID, key turnframe.IdempotencyKey, err error) error {
	return entryReadErr(account, key, "", err)
}

// entryReadErr words a failed read of the entry account admitted under key:
// "has no journal entry" only when the store said it has none (ErrNotFound),
// "could not read" followed by outcome for any other failure.
func entryReadErr(account turnframe.AccountID, key turnframe.IdempotencyKey, outcome string, err error) error {
	if errors.Is(err, turnframe.ErrNotFound) {
		return fmt.Errorf("account %s has no journal entry under the key %s: %w", cell(string(account)), cell(string(key)), err)
	}
	return fmt.Errorf("could not read the journal entry account %s admitted under the key %s%s: %w",
		cell(string(account)), cell(string(key)), outcome, err)
}

// checkBusy refuses a --busy-timeout under a millisecond, which SQLite
// would take as no wait at all: a usage error, as every command that
// opens a database says.
func (d *dbFlags) checkBusy() error {
	if d.busy < time.Millisecond {
		return usagef("--busy-timeout must be at least 1ms")
	}
	return nil
}
