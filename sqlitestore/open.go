package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/schema"

	"modernc.org/sqlite" // the driver ("sqlite") and its error type
	sqlite3 "modernc.org/sqlite/lib"
)

// readPoolSize bounds the read pool's connections.
const readPoolSize = 4

// busyRetries bounds how often in a row Open tries the migrations again
// after a try that waited out the busy timeout while the file's version did
// not move. goose takes no lock on SQLite: when several processes open one
// old file at once, each lists the migrations it lacks and queues for the
// write lock, and a migration of a big file (00004 copies the journal) may
// keep the others waiting longer than their busy timeout. A try that
// failed while the file's version rose — another opener committed a
// migration, or this one did — is always tried again: the failure was a
// stale run of a migration another opener applied first (every migration
// fails when run a second time: 00004 has a guard for it), or a wait that
// another opener's progress prolonged. Only a streak of tries in which
// nothing moved ends Open, as ErrBusy.
const busyRetries = int(schema.Version) + 1

// Open opens the store in the SQLite file at path and returns it ready:
// WAL mode verified, schema at schema.Version. Without WithExisting it
// creates the file if needed, owner-only (DefaultFileMode, 0600, or
// WithFileMode; an existing file keeps its mode), and applies the
// migrations the file lacks (each in its own transaction: a crash leaves
// the file at the last one that committed, and the next Open goes on). With WithExisting it opens the file
// as it is: it never creates it and never migrates it (see WithExisting).
//
// Errors: ErrInvalid for an empty path, for a file whose schema is newer
// than this build's (written by a newer turnframe: never touched), and for
// one whose own tables a migration clashes with (another application's
// table named like one of turnframe's: the migration rolls back); with
// WithExisting, ErrNotFound for a missing file and ErrInvalid for a file
// that is not a turnframe store or whose schema is older than this build's
// (run `turnframe migrate`); ErrBusy, never with ErrInvalid, when another
// connection keeps the file locked past the busy timeout (the same Open may
// succeed later), or the file system refuses a write, before any migration
// committed; otherwise the error of the file system, the driver or a
// migration: a migration that fails after this Open committed earlier ones
// names those, wrapping no ErrBusy (the next Open goes on from there).
// While another process migrates the file, Open waits for it as long as
// the file's version keeps moving: it gives up, ErrBusy, only once
// schema.Version + 1 busy timeouts in a row passed with the version
// unchanged. Two processes may open one new file at the same time: both
// succeed, and the schema is applied once.
//
// A file this process may not write (a read-only file or file system)
// opens, as SQLite opens it, read-only: reads work, and every write fails,
// saying the file is read-only, wrapping no sentinel.
//
// The writer pool is one connection with busy_timeout, foreign_keys,
// synchronous=FULL (NORMAL with WithSynchronousNormal) and BEGIN IMMEDIATE
// for every transaction; the read pool has query_only set. Open starts no
// goroutine.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	cfg := newConfig(opts)
	if path == "" {
		return nil, &turnframe.InvalidError{Field: "path", Reason: "empty"}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open: %w", err)
	}
	if cfg.existing {
		if err := checkExisting(ctx, abs, cfg); err != nil {
			return nil, fmt.Errorf("sqlitestore: open %s: %w", abs, err)
		}
	} else if err := createPrivate(abs, cfg.fileMode); err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", abs, err)
	}
	write, err := openWriter(ctx, abs, cfg)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", abs, err)
	}
	read, err := openReader(ctx, abs, cfg)
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", abs, err)
	}
	stmts, err := prepare(ctx, write, writeQueries())
	if err != nil {
		write.Close()
		read.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", abs, err)
	}
	reads, err := prepare(ctx, read, readQueries())
	if err != nil {
		stmts.close()
		write.Close()
		read.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", abs, err)
	}
	return &Store{path: abs, write: write, read: read, stmts: stmts, reads: reader{db: read, p: reads},
		ids: cfg.ids, busyTimeout: cfg.busyTimeout}, nil
}

// createPrivate creates the database file, empty, with mode, when it does
// not exist, so that SQLite never creates it with its own default (0644
// under the usual umask); SQLite then creates -wal and -shm with the same
// mode. An existing file is left as it is, mode included. Two openers
// racing on a new file are fine: O_EXCL lets one create it, and the other
// finds it. A path that is a symbolic link to a file not there yet (a data
// volume linked into place) is one O_EXCL refuses to follow: the file is
// then created through the link, with mode, where SQLite would create it
// with its default.
func createPrivate(path string, mode fs.FileMode) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrExist) {
		if _, serr := os.Stat(path); !errors.Is(serr, fs.ErrNotExist) {
			return nil // the file exists (or cannot be looked at: SQLite will say)
		}
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, mode) // a dangling link: create its target
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// dsn builds a file: URI for modernc.org/sqlite. The path is escaped, so a
// path with '?', '#' or '%' in it names the file it says.
func dsn(path string, params url.Values) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(path))
	return "file:" + esc + "?" + params.Encode()
}

// busyPragma is the busy_timeout pragma of cfg. SQLite reads it as a 32-bit
// count of milliseconds and takes a larger one as 0, no wait at all: a wait
// past that (about 24.8 days) is the longest SQLite keeps.
func busyPragma(cfg config) string {
	return "busy_timeout(" + strconv.FormatInt(min(cfg.busyTimeout.Milliseconds(), math.MaxInt32), 10) + ")"
}

// existingMode makes SQLite itself refuse to create the file, for a store
// opened WithExisting: "mode=rw" in a file: URI opens read-write, never
// create.
func existingMode(params url.Values, cfg config) url.Values {
	if cfg.existing {
		params.Set("mode", "rw")
	}
	return params
}

// openWriter opens the writer pool, switches the file to WAL, migrates it
// (unless WithExisting) and checks its schema version.
func openWriter(ctx context.Context, path string, cfg config) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn(path, existingMode(writerParams(cfg, true), cfg)))
	if err != nil {
		return nil, err
	}
	// One connection: writes queue here instead of contending for the file
	// lock. Never call this pool while holding one of its transactions.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := setWAL(ctx, db, cfg.busyTimeout); err != nil {
		db.Close()
		return nil, err
	}
	if !cfg.existing {
		if err := migrateFile(ctx, path, cfg); err != nil {
			db.Close()
			return nil, err
		}
	}
	// checkExisting checked the version of an existing file already; this
	// checks it again on the connection the store will use, and checks a
	// migrated file: a newer turnframe's file is refused, never used.
	if err := checkVersion(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// writerParams are the writer's connection parameters. store is false for
// the migrations' connection (migrateFile), which lets SQLite spill its
// page cache to the WAL and sort in temporary files, as it does by default.
func writerParams(cfg config, store bool) url.Values {
	sync := "FULL" // an outbox exists not to lose things: a commit survives a power loss
	if cfg.syncNormal {
		sync = "NORMAL"
	}
	params := url.Values{
		// Every BeginTx sends BEGIN IMMEDIATE: a transaction that read first
		// and then wrote would get SQLITE_BUSY at once, whatever the busy
		// timeout, when another connection wrote meanwhile.
		"_txlock": {"immediate"},
		"_pragma": {
			busyPragma(cfg),                // wait for another writer instead of failing at once
			"foreign_keys(1)",              // journal, events and outbox rows need their turn
			"synchronous(" + sync + ")",    // durability of a commit, see WithSynchronousNormal
			"journal_size_limit(67108864)", // truncate the WAL to 64 MiB after a checkpoint
		},
	}
	if store {
		// No changed page reaches the WAL before the COMMIT, and no
		// savepoint or statement journal, sort or RETURNING buffer goes
		// to a temporary file: a full disk then fails the COMMIT, never
		// a statement halfway through a transaction, which SQLite
		// answers by rolling back the whole transaction — an ApplyTx
		// caller's own rows with it.
		params["_pragma"] = append(params["_pragma"], "cache_spill(0)", "temp_store(2)")
	}
	return params
}

// migrateFile applies the migrations the file at path lacks (migrate) on
// a connection of its own, closed when they are done. A migration is one
// transaction that may copy a whole table (00004 rebuilds the journal) and
// sort it into indexes: kept in memory until its COMMIT, as the writer
// keeps a transaction, it needed memory growing with the file, twice its
// journal, and a process with less was killed at every start. This
// connection spills its cache to the WAL and sorts on disk, so a migration
// needs the cache's memory whatever the file's size. A full disk or a
// failed statement rolls the migration back whole, as any failure does:
// no caller's rows share its transaction.
func migrateFile(ctx context.Context, path string, cfg config) error {
	db, err := sql.Open("sqlite", dsn(path, writerParams(cfg, false)))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	return migrate(ctx, db)
}

// setWAL switches the file to WAL (readers never wait for the writer, and a
// commit appends instead of rewriting pages), then reads the mode back: a
// file system that cannot do WAL would otherwise leave it silently in
// another mode.
//
// Switching needs an exclusive lock. When two connections open a new file at
// once, both hold a shared lock while they switch, and SQLite refuses one of
// them at once with SQLITE_BUSY instead of calling the busy handler (waiting
// would deadlock). The loser tries again, a few milliseconds later, until
// the busy timeout: by then the winner has switched the file, and the loser
// finds it in WAL already.
func setWAL(ctx context.Context, db *sql.DB, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := trySetWAL(ctx, db)
		if err == nil || !errors.Is(err, ErrBusy) || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(5 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("set journal_mode: %w", ctx.Err())
		case <-t.C:
		}
	}
}

func trySetWAL(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("read journal_mode: %w", translate(ctx, err))
	}
	if !strings.EqualFold(mode, "wal") {
		if err := db.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
			return fmt.Errorf("set journal_mode: %w", translate(ctx, err))
		}
		if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
			return fmt.Errorf("read journal_mode: %w", translate(ctx, err))
		}
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal_mode is %q, not wal", mode)
	}
	return nil
}

// migrate applies the migrations db's file lacks, trying again after a
// failed try while the file's version moves, and after up to busyRetries
// tries in a row that waited out the busy timeout with nothing moved. A
// stale run of a migration another opener committed first fails, and the
// version rose meanwhile: it is tried again, never taken for the file's
// own refusal.
func migrate(ctx context.Context, db *sql.DB) error {
	var err error
	var applied []int64 // the migrations this call's failed tries committed
	for still := 0; still < busyRetries; {
		before, verr := schema.FileVersion(ctx, db)
		if err = schema.Up(ctx, db); err == nil || ctx.Err() != nil {
			break
		}
		var pe *goose.PartialError
		if errors.As(err, &pe) {
			for _, r := range pe.Applied {
				applied = append(applied, r.Source.Version)
			}
		}
		if after, aerr := schema.FileVersion(ctx, db); verr == nil && aerr == nil && after > before {
			still = 0 // another opener, or this one, went on: wait again
			continue
		}
		if !errors.Is(translate(ctx, err), ErrBusy) {
			break // nothing moved, and waiting was not what failed
		}
		still++
	}
	if err == nil {
		return nil
	}
	return migrateError(ctx, db, err, applied)
}

// migrateError is the error of migrate's last try, err, which nothing
// moved. A failure once a try of this call's committed a migration
// (applied) is not ErrBusy, whose "nothing was written" it would belie: it
// names the versions this call applied. A statement that failed is the
// file's own refusal of the schema: ErrInvalid. A wait for the write lock
// that outlasted the busy timeout every time is ErrBusy, saying at which
// version the file stayed.
func migrateError(ctx context.Context, db *sql.DB, err error, applied []int64) error {
	var se *sqlite.Error
	if ctx.Err() == nil && errors.As(err, &se) && se.Code() == sqlite3.SQLITE_ERROR {
		// Refused by what the file holds, every time: no retry mends it.
		return fmt.Errorf("migrate: %w: the file refused turnframe's schema (does another application keep tables of the same names in it?): %w",
			turnframe.ErrInvalid, err)
	}
	if len(applied) > 0 {
		moved := fmt.Sprintf("migrate: migrations %d to %d were applied, and the next one failed (Open again to go on from there)",
			slices.Min(applied), slices.Max(applied))
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("%s: %w: %w", moved, cerr, err)
		}
		return fmt.Errorf("%s: %w", moved, err)
	}
	if ctx.Err() == nil && errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY {
		v, _ := schema.FileVersion(ctx, db)
		return fmt.Errorf("migrate: the file stayed at schema version %d while another connection held its write lock "+
			"through %d busy timeouts in a row (another process migrating it, or a long write); "+
			"Open again once it is done, or give Open a longer WithBusyTimeout: %w", v, busyRetries, translate(ctx, err))
	}
	return fmt.Errorf("migrate: %w", translate(ctx, err))
}

func openReader(ctx context.Context, path string, cfg config) (*sql.DB, error) {
	params := url.Values{"_pragma": {
		busyPragma(cfg), // a read waits only while a checkpoint resets the WAL
		"query_only(1)", // this pool never writes
	}}
	db, err := sql.Open("sqlite", dsn(path, existingMode(params, cfg)))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(readPoolSize)
	db.SetMaxIdleConns(readPoolSize)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, translate(ctx, err)
	}
	return db, nil
}

// checkExisting refuses, without changing a byte of it, a path that is not
// an existing turnframe store at this build's schema version: it reads the
// header itself before the driver touches the file, and then reads the
// schema version through a read-only connection that cannot create it.
func checkExisting(ctx context.Context, path string, cfg config) error {
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: no such file", turnframe.ErrNotFound)
	}
	if err != nil {
		return err
	}
	if info.IsDir() {
		return fmt.Errorf("%w: a directory, not a SQLite file", turnframe.ErrInvalid)
	}
	// The file is read through SQLite alone (a file that is not a database
	// fails its first read): a descriptor of this code's own, once closed,
	// would drop every POSIX lock the process holds on the file, those
	// SQLite holds for another store of the process on it too.
	params := url.Values{"_pragma": {busyPragma(cfg), "query_only(1)"}}
	db, err := sql.Open("sqlite", dsn(path, existingMode(params, cfg)))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	return checkVersion(ctx, db)
}

// checkVersion returns nil when the file behind db holds the turnframe
// schema at exactly schema.Version, else an error wrapping
// turnframe.ErrInvalid that says what to do.
func checkVersion(ctx context.Context, db *sql.DB) error {
	v, err := schema.FileVersion(ctx, db)
	switch {
	case err != nil && ctx.Err() != nil:
		return translate(ctx, err)
	case err != nil:
		err = translate(ctx, err)
		if errors.Is(err, turnframe.ErrBusy) {
			// Another connection locks the file: the same Open may succeed later.
			return fmt.Errorf("read the schema version: %w", err)
		}
		return fmt.Errorf("%w: not a readable turnframe database: %w", turnframe.ErrInvalid, err)
	case v == 0:
		return fmt.Errorf("%w: a SQLite database without the turnframe schema", turnframe.ErrInvalid)
	case v < schema.Version:
		return fmt.Errorf("%w: the file's schema is version %d, older than version %d, which this turnframe uses; "+
			"run `turnframe migrate` on it first (it was left unchanged)", turnframe.ErrInvalid, v, schema.Version)
	case v > schema.Version:
		return fmt.Errorf("%w: the file's schema is version %d, written by a newer turnframe (this one knows up to version %d); "+
			"use that newer turnframe (the file was left unchanged)", turnframe.ErrInvalid, v, schema.Version)
	}
	return nil
}
