package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/pgstore"
)

// pgOps is the operator's store on a PostgreSQL database: pgstore's Store,
// opened on the schema as it is (WithExisting), and pgstore's operator
// reads. Times are on the database's clock, moved into the command's
// (WithHostClock), as the application's stores keep them.
type pgOps struct {
	*pgstore.Store
	name string // the URL without its password
}

var _ opStore = pgOps{}

// Name returns the URL without its password.
func (s pgOps) Name() string { return s.name }

// pgStatementTimeout bounds every statement the operator commands run on
// PostgreSQL: a read that would run longer (a huge table, a bad plan) is
// cancelled by the server rather than hold a snapshot for long.
const pgStatementTimeout = 30 * time.Second

// pgConnectTimeout bounds the wait for an unreachable server.
const pgConnectTimeout = 10 * time.Second

// openPG opens the database at rawURL for an operator command: the schema
// as it is, never migrated (pgstore.WithExisting). The connection is given
// a statement_timeout (pgStatementTimeout), a lock_timeout of busy (so a
// write that would wait longer for a row the application holds fails with
// turnframe.ErrBusy, having changed nothing), a connect_timeout and an
// application_name, unless the URL sets them.
func openPG(ctx context.Context, rawURL string, busy time.Duration, now func() time.Time) (*pgOps, error) {
	u, err := pgURL(rawURL, busy)
	if err != nil {
		return nil, err
	}
	name := redactURL(rawURL)
	store, err := pgstore.Open(ctx, u, pgstore.WithExisting(), pgstore.WithHostClock(now))
	var se *pgstore.SchemaError
	switch {
	case err == nil:
		return &pgOps{Store: store, name: name}, nil
	case errors.As(err, &se) && se.Found == 0:
		return nil, &openError{err: err, msg: fmt.Sprintf("%s holds no turnframe schema (in the first schema of its search_path); "+
			"nothing was created. 'turnframe migrate --db URL' makes one, or start the application, whose Open does", name)}
	case errors.As(err, &se) && se.Found < se.Want:
		return nil, &openError{err: err, msg: fmt.Sprintf("%s holds the turnframe schema version %d, older than version %d, "+
			"which this turnframe reads; it was left unchanged. Run 'turnframe migrate --db URL' to upgrade it "+
			"(or start the upgraded application, whose Open migrates it)", name, se.Found, se.Want)}
	case errors.As(err, &se):
		return nil, &openError{err: err, msg: fmt.Sprintf("%s holds the turnframe schema version %d, written by a newer "+
			"turnframe (this one knows up to version %d); it was left unchanged. Use a turnframe at least as new as "+
			"the application's", name, se.Found, se.Want)}
	}
	return nil, describeServer(err, name)
}

// pgURL returns rawURL with the operator's connection settings added
// (openPG). A usage error for a URL that does not parse, which names
// neither the URL nor its password.
func pgURL(rawURL string, busy time.Duration) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which holds the password
		}
		return "", usagef("--db: not a PostgreSQL URL: %v", err)
	}
	given, err := pgconn.ParseConfig(rawURL)
	if err != nil {
		return "", usagef("--db: not a URL PostgreSQL's driver reads: %s", oneLine(err))
	}
	q := u.Query()
	set := func(k, v string) {
		// A setting the URL makes, in its own parameter or in options
		// (or PGOPTIONS), is the operator's: one added here would
		// override it.
		if !q.Has(k) && !pgstore.SetsSetting(given.RuntimeParams, k) {
			q.Set(k, v)
		}
	}
	set("statement_timeout", fmt.Sprint(pgStatementTimeout.Milliseconds()))
	set("lock_timeout", fmt.Sprint(min(busy.Milliseconds(), math.MaxInt32))) // PostgreSQL refuses a longer one, and the connection with it
	set("connect_timeout", fmt.Sprint(int(pgConnectTimeout.Seconds())))
	set("application_name", "turnframe-cli")
	u.RawQuery = q.Encode()
	if _, err := pgconn.ParseConfig(u.String()); err != nil {
		return "", usagef("--db: not a URL PostgreSQL's driver reads: %s", oneLine(err))
	}
	return u.String(), nil
}

// redactURL returns the URL with its password, in the user part or as a
// password parameter, replaced by xxxxx: how every output names it.
func redactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "the PostgreSQL URL given with --db"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// urlPassword returns the password rawURL carries, if any.
func urlPassword(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	if p, ok := u.User.Password(); ok {
		return p
	}
	return u.Query().Get("password")
}

// userInfo matches the user and password of a PostgreSQL URL in a text,
// its scheme in any case.
var userInfo = regexp.MustCompile(`(?i)(postgres(?:ql)?://[^:@/\s]*:)[^@\s]*@`)

// redactText replaces every occurrence of rawURL's password in s, and the
// password of any PostgreSQL URL written out in s.
func redactText(s, rawURL string) string {
	if p := urlPassword(rawURL); p != "" {
		s = strings.ReplaceAll(s, p, "xxxxx")
		if esc := url.QueryEscape(p); esc != p {
			s = strings.ReplaceAll(s, esc, "xxxxx")
		}
		if esc := url.PathEscape(p); esc != p {
			s = strings.ReplaceAll(s, esc, "xxxxx")
		}
	}
	return userInfo.ReplaceAllString(s, "${1}xxxxx@")
}

// The SQLSTATE codes the operator's wording tells apart.
const (
	codeQueryCanceled      = "57014" // statement_timeout, or a cancel
	codeInsufficientPriv   = "42501"
	codeDuplicateTable     = "42P07" // a relation (table, index) of that name exists
	codeDuplicateObject    = "42710"
	codeInvalidPassword    = "28P01"
	codeInvalidAuth        = "28000"
	codeInvalidCatalogName = "3D000" // no such database
)

// describeServer words an error from a PostgreSQL server for the operator,
// in one line: a server it cannot reach or log in to, a statement past its
// timeout. A login the server refuses, a privilege the role lacks and a
// database the server does not have cannot succeed as given: they wrap
// turnframe.ErrInvalid and turnframe.ErrNotFound, which exit 2 (the first two
// are a denied *openError, which the page answers 403). A connection that
// cannot be opened once the store is open stays turnframe.ErrBusy, which
// the page answers 503. An error already worded (an openError) and other errors are returned as they are
// (describeBusy words a lock held past --busy-timeout, which pgstore
// reports as turnframe.ErrBusy).
func describeServer(err error, name string) error {
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	var worded *openError
	switch {
	case errors.As(err, &worded):
		return err // worded already, for what the command was doing (migrate's own refusals)
	case errors.As(err, &pe) && pe.Code == codeQueryCanceled:
		return fmt.Errorf("the server cancelled a statement that ran past %v (statement_timeout); nothing was changed: %w",
			pgStatementTimeout, turnframe.ErrBusy)
	case errors.As(err, &pe) && (pe.Code == codeInvalidPassword || pe.Code == codeInvalidAuth):
		// A role, password or host the server refuses (a typo, a pg_hba.conf
		// without the entry): no retry makes it, exit 2.
		return &openError{err: fmt.Errorf("%w: %w", turnframe.ErrInvalid, err), denied: true, msg: fmt.Sprintf("cannot log in to %s: %s "+
			"(check the URL's user and password, and the server's pg_hba.conf)", name, pe.Message)}
	case errors.As(err, &pe) && pe.Code == codeInsufficientPriv:
		// The role may not read or write turnframe's tables there: no
		// retry makes it, exit 2. The statement failed, so nothing changed.
		return &openError{err: fmt.Errorf("%w: %w", turnframe.ErrInvalid, err), denied: true, msg: fmt.Sprintf("the role of %s may not "+
			"do this there (%s); nothing was changed. Run it as a role that may (one granted the application's tables), "+
			"or have it granted", name, pe.Message)}
	case errors.As(err, &pe) && pe.Code == codeInvalidCatalogName:
		// No retry makes it: exit 2, as a --db file that does not exist.
		return fmt.Errorf("cannot connect to %s: %s (nothing was created): %w", name, pe.Message, turnframe.ErrNotFound)
	case errors.As(err, &ce) && errors.Is(err, turnframe.ErrBusy):
		// Once open, pgstore calls a connection it cannot open busy: the
		// server may be restarting, and the same request may succeed.
		return fmt.Errorf("cannot connect to %s: %s: %w", name, oneLine(ce.Unwrap()), turnframe.ErrBusy)
	case errors.As(err, &ce):
		return fmt.Errorf("cannot connect to %s: %s", name, oneLine(ce.Unwrap()))
	}
	return err
}

// oneLine returns the innermost message of err on one line, each distinct
// line of it once (the driver joins the same reason for each address or
// TLS mode it tried).
func oneLine(err error) string {
	if err == nil {
		return "no reason given"
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			break
		}
		err = next
	}
	var parts []string
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.Join(strings.Fields(line), " ")
		if line != "" && !slices.Contains(parts, line) {
			parts = append(parts, line)
		}
	}
	return strings.Join(parts, "; ")
}

func (s pgOps) counts(ctx context.Context) (outbox, turns map[string]int, err error) {
	c, err := s.Counts(ctx)
	if err != nil {
		return nil, nil, err
	}
	outbox, turns = map[string]int{}, map[string]int{}
	for k, n := range c.Outbox {
		outbox[k.String()] = n
	}
	for k, n := range c.Turns {
		turns[k.String()] = n
	}
	return outbox, turns, nil
}

func (s pgOps) due(ctx context.Context, now time.Time) (dueSummary, error) {
	d, err := s.DueAt(ctx, now)
	return dueSummary{rows: d.Rows, held: d.Held, oldest: d.Oldest, oldestDueAt: d.OldestDueAt}, err
}

func (s pgOps) endedLeases(ctx context.Context, now time.Time, limit int) ([]turnframe.OutboxID, int, error) {
	return s.EndedLeases(ctx, now, limit)
}

func (s pgOps) entriesIn(ctx context.Context, st turnframe.JournalStatus, limit int) ([]entryRef, int, error) {
	refs, n, err := s.EntriesIn(ctx, st, limit)
	out := make([]entryRef, 0, len(refs))
	for _, r := range refs {
		out = append(out, entryRef{account: r.Account, key: r.Key})
	}
	return out, n, err
}

func (s pgOps) listTurns(ctx context.Context, account turnframe.AccountID, after turnframe.TurnID, limit int) ([]turnframe.TurnPhaseMarker, error) {
	return s.ListTurns(ctx, account, after, limit)
}

func (s pgOps) turnAccount(ctx context.Context, turn turnframe.TurnID) (turnframe.AccountID, error) {
	return s.TurnAccount(ctx, turn)
}

func (s pgOps) turnOutbox(ctx context.Context, turn turnframe.TurnID, after turnframe.OutboxID, limit int) ([]turnframe.OutboxID, error) {
	return s.TurnOutbox(ctx, turn, after, limit)
}

func (s pgOps) destinationCounts(ctx context.Context, n int) ([]destinationCount, error) {
	cs, err := s.DestinationCounts(ctx, n)
	out := make([]destinationCount, 0, len(cs))
	for _, c := range cs {
		out = append(out, destinationCount{destination: c.Destination, status: c.Status.String(), rows: c.Rows})
	}
	return out, err
}

// outboxBefore is pgstore's OutboxBefore: a connection lost under it is
// ErrBusy, as for every other read.
func (s pgOps) outboxBefore(ctx context.Context, id turnframe.OutboxID, account turnframe.AccountID) (turnframe.OutboxID, error) {
	before, err := s.OutboxBefore(ctx, id, account)
	if err != nil {
		return turnframe.OutboxID{}, fmt.Errorf("find the row before %s: %w", id, err)
	}
	return before, nil
}

// schemaVersion reads the database's schema version as Open judged it
// (pgstore.DatabaseVersion: the version table of current_schema() only).
func (s pgOps) schemaVersion(ctx context.Context) (found, want int64, err error) {
	found, err = pgstore.DatabaseVersion(ctx, s.Pool())
	if err != nil {
		return 0, pgstore.SchemaVersion, fmt.Errorf("read the schema version: %w", err)
	}
	return found, pgstore.SchemaVersion, nil
}
