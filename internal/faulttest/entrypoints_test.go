package faulttest_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"

	_ "modernc.org/sqlite" // a plain SQLite file for TestOpenBadFiles
)

var okHandler = turnframe.HandlerFunc(func(ctx context.Context, c turnframe.Call) turnframe.Outcome {
	return turnframe.Commit(nil)
})

var okSender = turnframe.SenderFunc(func(ctx context.Context, e turnframe.OutboxEntry) turnframe.Dispatched {
	return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
})

type nopRecoveryHandler struct{}

func (nopRecoveryHandler) RestartInterpretation(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}
func (nopRecoveryHandler) ResumeCommands(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}
func (nopRecoveryHandler) RegenerateResponse(context.Context, turnframe.TurnPhaseMarker, turnframe.RecoveryAction) error {
	return nil
}

// apiCalls are bad calls of the Runtime, Dispatcher, Recovery and
// HTTPSender, each with the error class it must return.
func apiCalls() []struct {
	name string
	want error
	do   func(ctx context.Context, f *fixture) error
} {
	rt := func(f *fixture) *turnframe.Runtime { return turnframe.New(f.store) }
	rec := func(f *fixture) *turnframe.Recovery { return turnframe.NewRecovery(f.store) }
	disp := func(f *fixture) *turnframe.Dispatcher {
		return turnframe.NewDispatcher(f.store, okSender, turnframe.DispatchConfig{WorkerID: "w9"})
	}
	conv := turnframe.NewIDGenerator().ConversationID(t0)
	inv := turnframe.ErrInvalid
	type c = struct {
		name string
		want error
		do   func(ctx context.Context, f *fixture) error
	}
	return []c{
		{"Runtime.Receive/EmptyAccount", inv, func(ctx context.Context, f *fixture) error { _, err := rt(f).Receive(ctx, "", conv, "hi"); return err }},
		{"Runtime.Receive/ZeroConversation", inv, func(ctx context.Context, f *fixture) error {
			_, err := rt(f).Receive(ctx, f.account, turnframe.ConversationID{}, "hi")
			return err
		}},
		{"Runtime.Receive/NonUTF8Text", inv, func(ctx context.Context, f *fixture) error {
			_, err := rt(f).Receive(ctx, f.account, conv, badUTF8)
			return err
		}},
		{"Runtime.Receive/OversizeText", inv, func(ctx context.Context, f *fixture) error {
			_, err := rt(f).Receive(ctx, f.account, conv, long(64<<10+1))
			return err
		}},
		{"Runtime.Plan/ZeroTurn", inv, func(ctx context.Context, f *fixture) error {
			_, err := rt(f).Plan(ctx, f.account, turnframe.TurnID{}, turnframe.Plan{})
			return err
		}},
		{"Runtime.Plan/EmptyKey", inv, func(ctx context.Context, f *fixture) error {
			_, err := rt(f).Plan(ctx, f.account, f.turn, turnframe.Plan{Commands: []turnframe.Command{{Case: "c", Name: "n"}}})
			return err
		}},
		{"Runtime.Plan/KeyTwice", inv, func(ctx context.Context, f *fixture) error {
			cmd := turnframe.Command{Key: "k7", Case: "c", Name: "n"}
			_, err := rt(f).Plan(ctx, f.account, f.turn, turnframe.Plan{Commands: []turnframe.Command{cmd, cmd}})
			return err
		}},
		{"Runtime.Plan/BadLoadedCase", inv, func(ctx context.Context, f *fixture) error {
			_, err := rt(f).Plan(ctx, f.account, f.turn, turnframe.Plan{LoadedCases: []turnframe.CaseKey{turnframe.CaseKey(badUTF8)}})
			return err
		}},
		{"Runtime.Execute/NilHandler", inv, func(ctx context.Context, f *fixture) error {
			_, err := rt(f).Execute(ctx, f.account, f.turn, nil)
			return err
		}},
		{"Runtime.Execute/ZeroTurn", inv, func(ctx context.Context, f *fixture) error {
			_, err := rt(f).Execute(ctx, f.account, turnframe.TurnID{}, okHandler)
			return err
		}},
		{"Runtime.Deliver/OversizeResponse", inv, func(ctx context.Context, f *fixture) error {
			return rt(f).Deliver(ctx, f.account, f.turn, long(64<<10+1))
		}},
		{"Runtime.Deliver/NonUTF8Account", inv, func(ctx context.Context, f *fixture) error {
			return rt(f).Deliver(ctx, turnframe.AccountID(badUTF8), f.turn, "r")
		}},
		{"Runtime.Abandon/OversizeCode", inv, func(ctx context.Context, f *fixture) error {
			return rt(f).Abandon(ctx, f.account, f.turn, long(201))
		}},
		{"Recovery.Settle/EmptyRef", inv, func(ctx context.Context, f *fixture) error {
			return rec(f).Settle(ctx, turnframe.JournalSubject(f.account, ""), turnframe.Decision{Verdict: turnframe.VerdictCompleted})
		}},
		{"Recovery.Settle/VerdictOutOfRange", inv, func(ctx context.Context, f *fixture) error {
			return rec(f).Settle(ctx, turnframe.JournalSubject(f.account, "u1"), turnframe.Decision{Verdict: 17})
		}},
		{"Recovery.Settle/NonUTF8Code", inv, func(ctx context.Context, f *fixture) error {
			return rec(f).Settle(ctx, turnframe.JournalSubject(f.account, "u1"), turnframe.Decision{Verdict: turnframe.VerdictFailed, Code: badUTF8})
		}},
		{"Recovery.Settle/ActorControlChar", inv, func(ctx context.Context, f *fixture) error {
			return rec(f).Settle(ctx, turnframe.OutboxSubject(f.account, f.unknownRow), turnframe.Decision{Verdict: turnframe.VerdictFailed, Actor: "op\n"})
		}},
		{"Recovery.Settle/OversizeNote", inv, func(ctx context.Context, f *fixture) error {
			return rec(f).Settle(ctx, turnframe.OutboxSubject(f.account, f.unknownRow), turnframe.Decision{Verdict: turnframe.VerdictFailed, Note: long(turnframe.MaxNoteLen + 1)})
		}},
		{"Recovery.Settle/ATurnHasNoOutcome", inv, func(ctx context.Context, f *fixture) error {
			return rec(f).Settle(ctx, turnframe.TurnSubject(f.account, f.turn), turnframe.Decision{Verdict: turnframe.VerdictCompleted})
		}},
		{"Recovery.Settle/RowRefNotAnID", inv, func(ctx context.Context, f *fixture) error {
			return rec(f).Settle(ctx, turnframe.Subject{Kind: turnframe.SubjectOutbox, Account: f.account, Ref: "not-an-id"}, turnframe.Decision{Verdict: turnframe.VerdictCompleted})
		}},
		{"Recovery.Decide/ZeroTurn", inv, func(ctx context.Context, f *fixture) error {
			_, err := rec(f).Decide(ctx, f.account, turnframe.TurnID{})
			return err
		}},
		{"Recovery.Decide/EmptyAccount", inv, func(ctx context.Context, f *fixture) error {
			_, err := rec(f).Decide(ctx, "", f.turn)
			return err
		}},
		{"Recovery.Unfinished/ZeroLimit", inv, func(ctx context.Context, f *fixture) error {
			_, err := rec(f).Unfinished(ctx, turnframe.RecoveryScope{}, 0)
			return err
		}},
		{"Recovery.Recover/NilHandler", inv, func(ctx context.Context, f *fixture) error {
			_, err := rec(f).Recover(ctx, turnframe.RecoveryScope{}, nil)
			return err
		}},
		{"Recovery.Recover/BadAccount", inv, func(ctx context.Context, f *fixture) error {
			_, err := rec(f).Recover(ctx, turnframe.RecoveryScope{Account: turnframe.AccountID(badUTF8)}, nopRecoveryHandler{})
			return err
		}},
		{"Recovery.CaseEvents/EmptyCase", inv, func(ctx context.Context, f *fixture) error {
			_, err := rec(f).CaseEvents(ctx, f.account, "", 0)
			return err
		}},
		{"Recovery.StoredTurn/ZeroTurn", inv, func(ctx context.Context, f *fixture) error {
			_, err := rec(f).StoredTurn(ctx, f.account, turnframe.TurnID{})
			return err
		}},
		{"Dispatcher.RunOnce/ZeroNow", inv, func(ctx context.Context, f *fixture) error { _, err := disp(f).RunOnce(ctx, time.Time{}); return err }},
		{"NewHTTPSender/NotHTTP", inv, func(context.Context, *fixture) error {
			_, err := turnframe.NewHTTPSender(map[string]string{"pay": "ftp://example.com/x"})
			return err
		}},
		{"NewHTTPSender/Relative", inv, func(context.Context, *fixture) error {
			_, err := turnframe.NewHTTPSender(map[string]string{"pay": "/relative"})
			return err
		}},
		{"NewHTTPSender/Empty", inv, func(context.Context, *fixture) error {
			_, err := turnframe.NewHTTPSender(map[string]string{"pay": ""})
			return err
		}},
		{"NewHTTPSender/NoHost", inv, func(context.Context, *fixture) error {
			_, err := turnframe.NewHTTPSender(map[string]string{"pay": "http://"})
			return err
		}},
		{"NewHTTPSender/Unparsable", inv, func(context.Context, *fixture) error {
			_, err := turnframe.NewHTTPSender(map[string]string{"pay": "http://[::1"})
			return err
		}},
	}
}

// badClocks are clocks a Runtime may be given whose time no store takes,
// even cut to the microsecond as the Runtime cuts it: zero, the Unix epoch,
// before 1970, after MaxTime.
var badClocks = []struct {
	name string
	t    time.Time
}{
	{"Zero", time.Time{}},
	{"Epoch", time.Unix(0, 0).UTC()},
	{"Before1970", time.Date(1969, 7, 20, 20, 17, 0, 0, time.UTC)},
	{"MaxTimePlus1us", turnframe.MaxTime.Add(time.Microsecond)},
	{"Year10000", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
}

// apiCallsOfTheNewContract are the bad inputs of issues 11 and 12 at the
// entry points: a Runtime whose clock is out of range (its ids are clamped,
// so nothing panics; the store refuses the time), times out of range given
// to the Dispatcher and Recovery, keys no remote could tell apart, a
// replay record a store could not read back.
func apiCallsOfTheNewContract() []struct {
	name string
	want error
	do   func(ctx context.Context, f *fixture) error
} {
	type c = struct {
		name string
		want error
		do   func(ctx context.Context, f *fixture) error
	}
	inv := turnframe.ErrInvalid
	var calls []c
	add := func(name string, do func(ctx context.Context, f *fixture) error) {
		calls = append(calls, c{name, inv, do})
	}
	disp := func(f *fixture) *turnframe.Dispatcher {
		return turnframe.NewDispatcher(f.store, okSender, turnframe.DispatchConfig{WorkerID: "w9"})
	}
	for _, bc := range badClocks {
		at := bc.t
		rt := func(f *fixture) *turnframe.Runtime {
			return turnframe.New(f.store, turnframe.WithClock(func() time.Time { return at }))
		}
		rec := func(f *fixture) *turnframe.Recovery {
			return turnframe.NewRecovery(f.store, turnframe.WithClock(func() time.Time { return at }))
		}
		add("Runtime.Receive/Clock"+bc.name, func(ctx context.Context, f *fixture) error {
			r := rt(f)
			_, err := r.Receive(ctx, f.account, r.NewConversationID(), "hi")
			return err
		})
		add("Runtime.Plan/Clock"+bc.name, func(ctx context.Context, f *fixture) error {
			_, err := rt(f).Plan(ctx, f.account, f.planned, turnframe.Plan{Commands: []turnframe.Command{{Key: "p2", Case: "c1", Name: "book"}}})
			return err
		})
		add("Runtime.Execute/Clock"+bc.name, func(ctx context.Context, f *fixture) error {
			_, err := rt(f).Execute(ctx, f.account, f.planned, okHandler)
			return err
		})
		add("Runtime.Deliver/Clock"+bc.name, func(ctx context.Context, f *fixture) error {
			return rt(f).Deliver(ctx, f.account, f.unknownTurn, "checking")
		})
		add("Runtime.Abandon/Clock"+bc.name, func(ctx context.Context, f *fixture) error {
			return rt(f).Abandon(ctx, f.account, f.planned, "gone")
		})
		add("Recovery.Settle/EntryClock"+bc.name, func(ctx context.Context, f *fixture) error {
			return rec(f).Settle(ctx, turnframe.JournalSubject(f.account, "u1"), turnframe.Decision{Verdict: turnframe.VerdictCompleted})
		})
		add("Recovery.Settle/RowClock"+bc.name, func(ctx context.Context, f *fixture) error {
			return rec(f).Settle(ctx, turnframe.OutboxSubject(f.account, f.unknownRow), turnframe.Decision{Verdict: turnframe.VerdictCompleted})
		})
		add("Recovery.Recover/Clock"+bc.name, func(ctx context.Context, f *fixture) error {
			_, err := rec(f).Recover(ctx, turnframe.RecoveryScope{}, nopRecoveryHandler{})
			return err
		})
		if bc.t.IsZero() {
			continue // a zero time is "not given" to the calls below: covered elsewhere
		}
		add("Dispatcher.RunOnce/Now"+bc.name, func(ctx context.Context, f *fixture) error {
			_, err := disp(f).RunOnce(ctx, at)
			return err
		})
		add("Recovery.Recover/UpdatedBefore"+bc.name, func(ctx context.Context, f *fixture) error {
			_, err := turnframe.NewRecovery(f.store).Recover(ctx, turnframe.RecoveryScope{UpdatedBefore: at}, nopRecoveryHandler{})
			return err
		})
		add("Recovery.Unfinished/UpdatedBefore"+bc.name, func(ctx context.Context, f *fixture) error {
			_, err := turnframe.NewRecovery(f.store).Unfinished(ctx, turnframe.RecoveryScope{UpdatedBefore: at}, 10)
			return err
		})
	}
	// A clock at MaxTime itself is in range, but no attempt's lease may end
	// after it.
	add("Runtime.Execute/ClockAtMaxTime", func(ctx context.Context, f *fixture) error {
		_, err := turnframe.New(f.store, turnframe.WithClock(func() time.Time { return turnframe.MaxTime })).Execute(ctx, f.account, f.planned, okHandler)
		return err
	})
	add("Dispatcher.RunOnce/NowAtMaxTime", func(ctx context.Context, f *fixture) error {
		_, err := disp(f).RunOnce(ctx, turnframe.MaxTime)
		return err
	})
	for _, bk := range badKeys {
		key := bk.key
		add("Runtime.Plan/Key"+bk.name, func(ctx context.Context, f *fixture) error {
			_, err := turnframe.New(f.store).Plan(ctx, f.account, f.planned, turnframe.Plan{Commands: []turnframe.Command{{Key: key, Case: "c1", Name: "book"}}})
			return err
		})
	}
	for _, bk := range storedBadKeys {
		key := bk.key
		add("Recovery.Settle/Key"+bk.name, func(ctx context.Context, f *fixture) error {
			return turnframe.NewRecovery(f.store).Settle(ctx, turnframe.JournalSubject(f.account, key), turnframe.Decision{Verdict: turnframe.VerdictCompleted})
		})
	}
	add("Runtime.Plan/AnswerBasisOutOfRange", func(ctx context.Context, f *fixture) error {
		_, err := turnframe.New(f.store).Plan(ctx, f.account, f.planned, turnframe.Plan{
			Understanding: &turnframe.Understanding{Questions: []turnframe.UnderstoodQuestion{{Basis: 7}}},
			Commands:      []turnframe.Command{{Key: "p2", Case: "c1", Name: "book"}},
		})
		return err
	})
	return calls
}

// TestEntryPointsBadInput: the Runtime, Recovery, Dispatcher and
// HTTPSender refuse bad input with the right class (bad input as an
// *InvalidError naming its field), never panic, and leave the database as
// it was.
func TestEntryPointsBadInput(t *testing.T) {
	for _, o := range openers {
		t.Run(o.name, func(t *testing.T) {
			f := newFixture(t, o)
			before, dump := fileState(t, f.path), dumpStore(t, f)
			for _, c := range append(apiCalls(), apiCallsOfTheNewContract()...) {
				t.Run(c.name, func(t *testing.T) {
					is := is.New(t)
					err := safely(func() error { return c.do(bg, f) })
					is.True(errors.Is(err, c.want)) // the right class
					if c.want == turnframe.ErrInvalid {
						var ie *turnframe.InvalidError
						is.True(errors.As(err, &ie) && ie.Field != "") // naming the field
					}
				})
			}
			is := is.New(t)
			is.Equal(fileState(t, f.path), before) // the file is unchanged
			is.Equal(dumpStore(t, f), dump)        // the store holds what it held
		})
	}
}

// TestEntryPointsCancelledContext: with a cancelled context the runtime,
// recovery and dispatcher over sqlitestore return context.Canceled and
// write nothing.
func TestEntryPointsCancelledContext(t *testing.T) {
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	f := newFixture(t, openers[1])
	before := fileState(t, f.path)
	rt := turnframe.New(f.store)
	calls := map[string]func() error{
		"Runtime.Receive": func() error { _, err := rt.Receive(cancelled, f.account, rt.NewConversationID(), "hi"); return err },
		"Runtime.Execute": func() error { _, err := rt.Execute(cancelled, f.account, f.turn, okHandler); return err },
		"Runtime.Abandon": func() error { return rt.Abandon(cancelled, f.account, f.turn, "x") },
		"Recovery.Settle": func() error {
			return turnframe.NewRecovery(f.store).Settle(cancelled, turnframe.JournalSubject(f.account, "u1"), turnframe.Decision{Verdict: turnframe.VerdictCompleted})
		},
		"Recovery.Recover": func() error {
			_, err := turnframe.NewRecovery(f.store).Recover(cancelled, turnframe.RecoveryScope{}, nopRecoveryHandler{})
			return err
		},
		"Dispatcher.RunOnce": func() error {
			_, err := turnframe.NewDispatcher(f.store, okSender, turnframe.DispatchConfig{WorkerID: "w9"}).RunOnce(cancelled, t0.Add(time.Hour))
			return err
		},
		"Recovery.RecoverAfterTheLeases": func() error {
			_, err := turnframe.NewRecovery(f.store, turnframe.WithClock(func() time.Time { return t0.Add(2 * fixtureLease) })).
				Recover(cancelled, turnframe.RecoveryScope{}, nopRecoveryHandler{})
			return err
		},
	}
	for name, do := range calls {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			err := safely(do)
			is.True(errors.Is(err, context.Canceled)) // the context's error
		})
	}
	is.New(t).Equal(fileState(t, f.path), before) // nothing written
}

// TestProgrammerErrorsPanicAsDocumented: the constructors document a panic
// for a nil store, a nil sender and a bad worker id: programmer errors, not
// inputs. Each panics with a message naming what was wrong, and nothing
// else does.
func TestProgrammerErrorsPanicAsDocumented(t *testing.T) {
	f := newFixture(t, openers[0])
	cases := map[string]func(){
		"New/NilStore":                func() { turnframe.New(nil) },
		"NewRecovery/NilStore":        func() { turnframe.NewRecovery(nil) },
		"NewDispatcher/NilStore":      func() { turnframe.NewDispatcher(nil, okSender, turnframe.DispatchConfig{WorkerID: "w"}) },
		"NewDispatcher/NilSender":     func() { turnframe.NewDispatcher(f.store, nil, turnframe.DispatchConfig{WorkerID: "w"}) },
		"NewDispatcher/EmptyWorker":   func() { turnframe.NewDispatcher(f.store, okSender, turnframe.DispatchConfig{}) },
		"NewDispatcher/NonUTF8Worker": func() { turnframe.NewDispatcher(f.store, okSender, turnframe.DispatchConfig{WorkerID: badUTF8}) },
		"NewDispatcher/OversizeBatch": func() {
			turnframe.NewDispatcher(f.store, okSender, turnframe.DispatchConfig{WorkerID: "w", BatchSize: turnframe.MaxLimit + 1})
		},
	}
	for name, do := range cases {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			err := safely(func() error { do(); return nil })
			is.True(err != nil)                                 // it panics
			is.True(strings.Contains(err.Error(), "turnframe")) // with a message saying whose
		})
	}
}

// TestOpenBadFiles: a file that is not SQLite, a truncated database, a
// read-only file and a missing file with WithExisting give a clear error,
// never a panic, and leave the file as it was.
func TestOpenBadFiles(t *testing.T) {
	t.Run("EmptyPath", func(t *testing.T) {
		is := is.New(t)
		_, err := sqlitestore.Open(bg, "")
		is.True(errors.Is(err, turnframe.ErrInvalid)) // an empty path is bad input
	})
	t.Run("MissingWithExisting", func(t *testing.T) {
		is := is.New(t)
		path := filepath.Join(t.TempDir(), "missing.db")
		_, err := sqlitestore.Open(bg, path, sqlitestore.WithExisting())
		is.True(errors.Is(err, turnframe.ErrNotFound)) // missing
		_, statErr := os.Stat(path)
		is.True(errors.Is(statErr, os.ErrNotExist)) // and not created
	})
	notSQLite := bytes.Repeat([]byte("this is not a database, it is a text file.\n"), 200)
	valid := validDatabase(t)
	for _, tc := range []struct {
		name     string
		content  []byte
		existing bool
	}{
		{"NotSQLite", notSQLite, false},
		{"NotSQLiteWithExisting", notSQLite, true},
		{"EmptyFileWithExisting", nil, true},
		{"TruncatedHeader", valid[:50], false},
		{"TruncatedHalf", valid[:len(valid)/2], false},
		{"TruncatedHalfWithExisting", valid[:len(valid)/2], true},
		{"SQLiteWithoutSchemaWithExisting", plainSQLite(t), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			path := filepath.Join(t.TempDir(), "bad.db")
			is.NoErr(os.WriteFile(path, tc.content, 0o644))
			var opts []sqlitestore.Option
			if tc.existing {
				opts = append(opts, sqlitestore.WithExisting())
			}
			var s *sqlitestore.Store
			err := safely(func() error {
				var err error
				s, err = sqlitestore.Open(bg, path, opts...)
				return err
			})
			if err == nil {
				s.Close()
			}
			is.True(err != nil) // a clear error
			is.True(!strings.HasPrefix(err.Error(), "panic"))
			after, rerr := os.ReadFile(path)
			is.NoErr(rerr)
			is.True(bytes.Equal(after, tc.content)) // the file untouched
			for _, side := range []string{"-wal", "-journal"} {
				if st, err := os.Stat(path + side); err == nil && st.Size() > 0 {
					t.Errorf("Open left a non-empty %s beside a file it refused", side)
				}
			}
			t.Logf("error: %v", err)
		})
	}
	t.Run("ReadOnlyFile", func(t *testing.T) {
		is := is.New(t)
		dir := t.TempDir()
		path := filepath.Join(dir, "ro.db")
		is.NoErr(os.WriteFile(path, valid, 0o444))
		makeReadOnly(t, path, dir)
		s, err := sqlitestore.Open(bg, path)
		if err == nil {
			s.Close()
		}
		is.True(err != nil) // a read-only file cannot hold a store that writes
		t.Logf("error: %v", err)
		after, _ := os.ReadFile(path)
		is.True(bytes.Equal(after, valid)) // untouched
	})
}

// makeReadOnly makes the file and its directory read-only for this process,
// and writable again when the test ends. Permission bits do not stop root,
// so as root (CI runs as root) it marks them immutable with chattr +i, which
// binds root too; only where the file system has no such flag does the test
// stop, saying so.
func makeReadOnly(t *testing.T, file, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		return
	}
	if out, err := exec.Command("chattr", "+i", file, dir).CombinedOutput(); err != nil {
		exec.Command("chattr", "-i", file, dir).Run()
		t.Skipf("running as root on a file system without chattr +i (%v: %s): no read-only file can be made here", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("chattr", "-i", dir, file).CombinedOutput(); err != nil {
			t.Errorf("chattr -i: %v: %s", err, out)
		}
	})
}

// validDatabase returns the bytes of a checkpointed turnframe database.
func validDatabase(t *testing.T) []byte {
	t.Helper()
	f := newFixture(t, openers[1])
	if err := f.store.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 4096 {
		t.Fatalf("database of %d bytes: expected several pages", len(b))
	}
	return b
}

// plainSQLite returns the bytes of a SQLite database holding one unrelated
// table and no turnframe schema.
func plainSQLite(t *testing.T) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plain.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('x')"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
