package sqlitestore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/schema"
)

// createAtVersion creates a file at path holding the turnframe schema up to
// migration version only, as a turnframe of that version left it, and
// returns it open (closed when the test ends).
func createAtVersion(t *testing.T, path string, version int64) *sql.DB {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := schema.UpTo(ctx, db, version); err != nil {
		t.Fatalf("migrate to version %d: %v", version, err)
	}
	return db
}

// v1Fixture is what a turnframe at schema version 1 left in a file: turns,
// journal entries in every status, an event, and outbox rows in every
// status, among them two rows of one account sharing the key "k/1" (the old
// scheme's second row of command "k" and the one row of a command keyed
// "k/1": the collision issue 11 item 3 describes), that key in another
// account, a Dispatching row and a Pending row it holds back.
type v1Fixture struct {
	turns   []turnframe.StoredTurn
	entries []turnframe.JournalEntry
	event   turnframe.StoredEvent
	rows    []turnframe.OutboxRecord // in enqueue order: seq i+1
	held    map[int]bool             // rows[i] is marked held
}

func newV1Fixture() v1Fixture {
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	delivered, executing, committed, globex := ids.TurnID(t0), ids.TurnID(t0), ids.TurnID(t0), ids.TurnID(t0)
	turn := func(account turnframe.AccountID, id turnframe.TurnID, phase turnframe.TurnPhase) turnframe.StoredTurn {
		return turnframe.StoredTurn{Account: account, ID: id, Conversation: ids.ConversationID(t0), Text: "hello",
			Phase: phase, ReceivedAt: t0, UpdatedAt: at(time.Second)}
	}
	ev := turnframe.StoredEvent{ID: ids.EventID(t0), Account: "acme", Turn: delivered, Key: "k", Revision: 1,
		Event: turnframe.Event{Case: "booking/1", Type: "booking.confirmed", Data: []byte(`{}`)}, At: at(time.Second)}
	entry := func(account turnframe.AccountID, key turnframe.IdempotencyKey, turn turnframe.TurnID, status turnframe.JournalStatus) turnframe.JournalEntry {
		return turnframe.JournalEntry{Account: account, Turn: turn, Status: status,
			Command:    turnframe.Command{Key: key, Case: "booking/1", Name: "book", Payload: []byte(`{"seat":"1A"}`)},
			AdmittedAt: t0, UpdatedAt: at(time.Second)}
	}
	k := entry("acme", "k", delivered, turnframe.JournalCommitted)
	k.Attempt, k.Attempts, k.EventIDs = ids.AttemptID(t0), 1, []turnframe.EventID{ev.ID}
	x := entry("acme", "x", executing, turnframe.JournalExecuting)
	x.Attempt, x.Attempts = ids.AttemptID(t0), 1
	r := entry("acme", "r", delivered, turnframe.JournalRejected)
	r.Attempt, r.Attempts, r.Code = ids.AttemptID(t0), 1, "no_seat"
	u := entry("acme", "u", delivered, turnframe.JournalOutcomeUnknown)
	u.Attempt, u.Attempts, u.RemoteRef = ids.AttemptID(t0), 1, "ref-u"

	row := func(account turnframe.AccountID, turn turnframe.TurnID, key turnframe.IdempotencyKey, status turnframe.OutboxStatus) turnframe.OutboxRecord {
		return turnframe.OutboxRecord{
			OutboxEntry: turnframe.OutboxEntry{ID: ids.OutboxID(t0), Account: account, Turn: turn, Key: key,
				Destination: "payments", Payload: []byte(`{"cents":100}`), CreatedAt: t0},
			Status: status, DueAt: t0, UpdatedAt: t0,
		}
	}
	completed := row("acme", delivered, "k/1", turnframe.OutboxCompleted)
	completed.Attempts, completed.ClaimedBy, completed.ClaimedAt = 1, "w", at(time.Minute)
	completed.RemoteRef, completed.UpdatedAt, completed.FinishedAt = "ref-1", at(time.Minute), at(time.Minute)
	failed := row("acme", delivered, "k/2", turnframe.OutboxFailed)
	failed.Attempts, failed.ClaimedBy, failed.ClaimedAt = 5, "w", at(time.Minute)
	failed.LastCode, failed.UpdatedAt, failed.FinishedAt = "declined", at(time.Minute), at(time.Minute)
	duplicate := row("acme", committed, "k/1", turnframe.OutboxPending) // command "k/1"'s one row
	dispatching := row("acme", delivered, "u/1", turnframe.OutboxDispatching)
	dispatching.OrderKey, dispatching.Attempts, dispatching.ClaimedBy = "card", 2, "w"
	dispatching.ClaimedAt, dispatching.UpdatedAt, dispatching.LastCode = at(time.Hour), at(time.Hour), "http.503"
	behind := row("acme", delivered, "u/2", turnframe.OutboxPending)
	behind.OrderKey = "card"
	unknown := row("acme", delivered, "u", turnframe.OutboxOutcomeUnknown)
	unknown.Attempts, unknown.ClaimedBy, unknown.ClaimedAt = 1, "w", at(time.Minute)
	unknown.RemoteRef, unknown.UpdatedAt = "ref-u", at(time.Minute)
	other := row("globex", globex, "k/1", turnframe.OutboxPending)

	return v1Fixture{
		turns: []turnframe.StoredTurn{
			turn("acme", delivered, turnframe.PhaseDelivered),
			turn("acme", executing, turnframe.PhaseExecuting),
			turn("acme", committed, turnframe.PhaseCommitted),
			turn("globex", globex, turnframe.PhaseCommitted),
		},
		entries: []turnframe.JournalEntry{
			k, entry("acme", "k/1", committed, turnframe.JournalCommitted),
			entry("acme", "p", executing, turnframe.JournalPending), x, r, u,
			entry("globex", "k", globex, turnframe.JournalCommitted),
		},
		event: ev,
		rows:  []turnframe.OutboxRecord{completed, failed, duplicate, dispatching, behind, unknown, other},
		held:  map[int]bool{4: true},
	}
}

// write inserts the fixture with the column lists of schema version 1.
func (f v1Fixture) write(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx := context.Background()
	us := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixMicro()
	}
	id := func(v interface {
		IsZero() bool
		String() string
	}) string {
		if v.IsZero() {
			return ""
		}
		return v.String()
	}
	exec := func(query string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, query, args...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	for _, tr := range f.turns {
		exec(`INSERT INTO turns (id, account, conversation, text, phase, received_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			tr.ID.String(), string(tr.Account), tr.Conversation.String(), tr.Text, tr.Phase.String(), us(tr.ReceivedAt), us(tr.UpdatedAt))
	}
	for _, e := range f.entries {
		evIDs := []string{}
		for _, ev := range e.EventIDs {
			evIDs = append(evIDs, ev.String())
		}
		b, err := json.Marshal(evIDs)
		if err != nil {
			t.Fatal(err)
		}
		exec(`INSERT INTO journal (account, key, turn, case_key, name, payload, status, attempt, attempts, event_ids,
			code, remote_ref, admitted_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			string(e.Account), string(e.Key), e.Turn.String(), string(e.Case), e.Name, e.Payload, e.Status.String(),
			id(e.Attempt), e.Attempts, string(b), e.Code, e.RemoteRef, us(e.AdmittedAt), us(e.UpdatedAt))
	}
	ev := f.event
	exec(`INSERT INTO events (id, account, case_key, revision, turn, key, type, data, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		ev.ID.String(), string(ev.Account), string(ev.Case), int64(ev.Revision), ev.Turn.String(), string(ev.Key),
		ev.Type, ev.Data, us(ev.At))
	for i, r := range f.rows {
		held := 0
		if f.held[i] {
			held = 1
		}
		exec(`INSERT INTO outbox (seq, id, account, turn, key, destination, payload, order_key, status, attempts, due_at,
			claimed_by, claimed_at, last_code, remote_ref, created_at, updated_at, finished_at, held)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			i+1, r.ID.String(), string(r.Account), r.Turn.String(), string(r.Key), r.Destination, r.Payload, r.OrderKey,
			r.Status.String(), r.Attempts, us(r.DueAt), r.ClaimedBy, us(r.ClaimedAt), r.LastCode, r.RemoteRef,
			us(r.CreatedAt), us(r.UpdatedAt), us(r.FinishedAt), held)
	}
}

// A file a turnframe at schema version 1 wrote opens: it is migrated, every
// row is kept and reads back as it was, the later of two rows of one
// account that share a key is renamed "<key>~dup<seq>", a Dispatching row
// gets a lease of ten minutes from its claim, and the store works on it.
func TestOpenMigratesAVersion1File(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	f := newV1Fixture()
	db := createAtVersion(t, path, 1)
	f.write(t, db)
	is.New(t).NoErr(db.Close())

	s := mustOpenPath(t, path)

	// What the migration must make of each row.
	want := append([]turnframe.OutboxRecord{}, f.rows...)
	want[2].Key = "k/1~dup3"                                       // the later "k/1" of acme, seq 3
	want[3].LeaseUntil = f.rows[3].ClaimedAt.Add(10 * time.Minute) // claimed before leases existed

	t.Run("SchemaIsCurrent", func(t *testing.T) {
		is := is.New(t)
		v, err := schema.FileVersion(ctx, s.ReadDB())
		is.NoErr(err)
		is.Equal(v, schema.Version)
	})
	t.Run("EveryOutboxRowReadsBack", func(t *testing.T) {
		is := is.New(t)
		for _, w := range want {
			got, err := s.GetOutbox(ctx, w.ID)
			is.NoErr(err)    // the row is kept
			is.Equal(got, w) // and reads back as the migration leaves it
		}
		all, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Limit: 100})
		is.NoErr(err)
		is.Equal(all, want) // no row more, none less, in enqueue order
	})
	t.Run("OnlyTheLaterDuplicateIsRenamed", func(t *testing.T) {
		is := is.New(t)
		globex, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Account: "globex", Limit: 10})
		is.NoErr(err)
		is.Equal(len(globex), 1)
		is.Equal(globex[0].Key, turnframe.IdempotencyKey("k/1")) // another account's "k/1" is no duplicate
		first, err := s.GetOutbox(ctx, f.rows[0].ID)
		is.NoErr(err)
		is.Equal(first.Key, turnframe.IdempotencyKey("k/1")) // the first keeps its key
	})
	t.Run("EveryJournalEntryTurnAndEventReadsBack", func(t *testing.T) {
		is := is.New(t)
		for _, e := range f.entries {
			got, err := s.ByKey(ctx, e.Account, e.Key)
			is.NoErr(err)
			is.Equal(got, e) // an executing entry's lease is zero: ended
		}
		for _, tr := range f.turns {
			got, err := s.LoadTurn(ctx, tr.Account, tr.ID)
			is.NoErr(err)
			is.Equal(got, tr)
		}
		evs, err := s.EventsByID(ctx, "acme", []turnframe.EventID{f.event.ID})
		is.NoErr(err)
		is.Equal(evs, []turnframe.StoredEvent{f.event})
	})

	// The store works on the migrated file (these subtests run in order).
	later := t0.Add(2 * time.Hour)
	t.Run("ClaimTakesTheDueRowsAndNotTheHeldOne", func(t *testing.T) {
		is := is.New(t)
		claims, err := s.ClaimDue(ctx, later, 16, "w2", lease)
		is.NoErr(err)
		is.Equal(len(claims), 2)
		is.Equal(claims[0].ID, want[2].ID) // the renamed duplicate is sent, under its new key
		is.Equal(claims[0].Key, want[2].Key)
		is.Equal(claims[1].ID, want[6].ID)
	})
	t.Run("TheOldClaimExpiresWhenItsLeaseEnds", func(t *testing.T) {
		is := is.New(t)
		ids, err := s.ExpireClaims(ctx, want[3].LeaseUntil.Add(-time.Microsecond))
		is.NoErr(err)
		is.Equal(len(ids), 0) // its lease still runs
		ids, err = s.ExpireClaims(ctx, want[3].LeaseUntil)
		is.NoErr(err)
		is.Equal(ids, []turnframe.OutboxID{want[3].ID})
		row, err := s.GetOutbox(ctx, want[3].ID)
		is.NoErr(err)
		is.Equal(row.Status, turnframe.OutboxOutcomeUnknown) // its send may have started
	})
	t.Run("AnOldExecutingEntryCanBeTakenOver", func(t *testing.T) {
		is := is.New(t)
		x := f.entries[3]
		applied, err := s.Apply(ctx, turnframe.Write{Account: "acme", Turn: x.Turn, Now: later,
			Settle: []turnframe.Settlement{{Key: x.Key, To: turnframe.JournalExecuting, Attempt: ids.AttemptID(later), Prior: x.Attempt, Lease: lease}}})
		is.NoErr(err)
		is.Equal(applied.Settled[0].Attempts, 2)
		is.Equal(applied.Settled[0].LeaseUntil, later.Add(lease))
	})
	t.Run("NewRowsGetTheNewKeys", func(t *testing.T) {
		is := is.New(t)
		prepare, commit := commitWrites("acme", "n", turnframe.OutboxMessage{Destination: "a"}, turnframe.OutboxMessage{Destination: "b"})
		_, err := s.Apply(ctx, prepare)
		is.NoErr(err)
		applied, err := s.Apply(ctx, commit)
		is.NoErr(err)
		is.Equal(applied.Outbox[0].Key, turnframe.IdempotencyKey("n~1"))
		is.Equal(applied.Outbox[1].Key, turnframe.IdempotencyKey("n~2"))
	})
	t.Run("ARowWhoseKeyAnOldRowHoldsIsConflict", func(t *testing.T) {
		is := is.New(t)
		// A new command keyed "k/2" would send its one row under "k/2",
		// which the old scheme gave command "k"'s second row: a remote
		// would drop it as a replay. The commit is refused, whole.
		prepare, commit := commitWrites("acme", "k/2", turnframe.OutboxMessage{Destination: "payments"})
		_, err := s.Apply(ctx, prepare)
		is.NoErr(err)
		before := count(t, s, "events")
		_, err = s.Apply(ctx, commit)
		is.True(errors.Is(err, turnframe.ErrConflict)) // the key is taken
		t.Log(err)
		e, err := s.ByKey(ctx, "acme", "k/2")
		is.NoErr(err)
		is.Equal(e.Status, turnframe.JournalExecuting) // the settlement did not land
		is.Equal(count(t, s, "events"), before)        // nor its event
		rows, err := s.ListOutbox(ctx, turnframe.OutboxFilter{Account: "acme", Limit: 100})
		is.NoErr(err)
		keys := 0
		for _, r := range rows {
			if r.Key == "k/2" {
				keys++
			}
		}
		is.Equal(keys, 1) // the old row alone holds the key
	})
}
