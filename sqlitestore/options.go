package sqlitestore

import (
	"io/fs"
	"time"

	"github.com/turnframe/turnframe"
)

// Option configures Open. Each option's zero value keeps the default.
type Option func(*config)

type config struct {
	syncNormal  bool
	busyTimeout time.Duration
	ids         *turnframe.IDGenerator
	existing    bool
	fileMode    fs.FileMode
}

// DefaultBusyTimeout is how long a write waits for a file that another
// connection holds locked for writing before it fails with ErrBusy.
const DefaultBusyTimeout = 5 * time.Second

// DefaultFileMode is the mode Open creates a new database file with:
// readable and writable by its owner alone, for the file holds users'
// messages and the payloads of their commands.
const DefaultFileMode fs.FileMode = 0o600

func newConfig(opts []Option) config {
	c := config{busyTimeout: DefaultBusyTimeout, fileMode: DefaultFileMode}
	for _, opt := range opts {
		opt(&c)
	}
	if c.ids == nil {
		c.ids = turnframe.NewIDGenerator()
	}
	return c
}

// WithSynchronousNormal sets synchronous=NORMAL instead of the default FULL.
// In WAL mode a commit then no longer waits for the disk: several times the
// write throughput, but a power loss (not a process crash) may undo the last
// commits — an outbox row, or the settlement of one that was sent.
func WithSynchronousNormal() Option {
	return func(c *config) { c.syncNormal = true }
}

// WithBusyTimeout sets how long a write waits for the file's write lock
// while another connection holds it (default DefaultBusyTimeout). It is
// rounded down to the millisecond; a d under one millisecond keeps the
// default.
func WithBusyTimeout(d time.Duration) Option {
	return func(c *config) {
		if d >= time.Millisecond {
			c.busyTimeout = d
		}
	}
}

// WithIDGenerator draws event and outbox ids from g, for tests that need
// reproducible ids. A nil g keeps the default, turnframe.NewIDGenerator().
func WithIDGenerator(g *turnframe.IDGenerator) Option {
	return func(c *config) { c.ids = g }
}

// WithExisting makes Open open the file as it is: never create it, never
// migrate it. The file must exist (else an error wrapping
// turnframe.ErrNotFound) and be a SQLite database holding the turnframe
// schema at exactly schema.Version, the version this build uses (else an
// error wrapping turnframe.ErrInvalid: for an older schema it says to run
// `turnframe migrate`, for a newer one that a newer turnframe wrote the
// file). A refused file is not modified. Operator tools use it, so that a
// mistyped path is an error, not a new empty store, and so that running
// one never changes the schema of a live application's file: only the
// application's own Open, and `turnframe migrate`, migrate.
func WithExisting() Option {
	return func(c *config) { c.existing = true }
}

// WithFileMode sets the permission bits Open creates a new database file
// with (default DefaultFileMode, 0600), before the process's umask. SQLite
// gives the file's -wal and -shm companions the database file's
// permissions. Open never changes the mode of a file that exists: a file an
// earlier version created 0644 stays so until its owner runs chmod. A mode
// with no permission bits (0) keeps the default; bits other than the
// permission bits are ignored.
func WithFileMode(mode fs.FileMode) Option {
	return func(c *config) {
		if mode.Perm() != 0 {
			c.fileMode = mode.Perm()
		}
	}
}
