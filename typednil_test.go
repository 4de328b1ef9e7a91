package turnframe_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// NewDispatcher "panics on programmer errors: a nil store or sender". A nil
// *HTTPSender — NewHTTPSender's result when the app logged its error and
// went on — is a nil sender too. It was taken: every row it claimed
// "panicked" and became OutcomeUnknown, though nothing was sent, and each
// then waits for a policy or a person.
func TestNewDispatcherPanicsOnANilSenderOfAConcreteType(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	rows := dispEnqueue(t, store, "acme", "k1", dispMessages(1, "payments", "")...)
	var sender *turnframe.HTTPSender // NewHTTPSender failed; the error was only logged
	msg := func() (msg string) {
		defer func() { msg, _ = recover().(string) }()
		d := turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "w1"})
		report, err := d.RunOnce(context.Background(), dispNow)
		if err == nil && len(report.Unknown) == 1 {
			rec := dispGet(t, store, rows[0].ID)
			t.Logf("the row never sent is %v with %q", rec.Status, rec.LastCode)
		}
		return ""
	}()
	is.True(strings.Contains(msg, "nil sender")) // a programmer error, found at start-up
}

// Execute is "ErrInvalid for ... a nil h, before anything is read". A nil
// HandlerFunc or a nil *Mux is a nil h: it was taken, the entry was taken
// for an attempt, and the nil handler's panic recorded the command as an
// unknown outcome (I15) though it never ran.
func TestExecuteRefusesANilHandlerOfAConcreteType(t *testing.T) {
	for name, h := range map[string]turnframe.Handler{
		"HandlerFunc": turnframe.HandlerFunc(nil),
		"Mux":         (*turnframe.Mux)(nil),
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			store := memstoreFor(t)
			rt := turnframe.New(store)
			turn := rtPlanned(t, rt, rtAccount, rtCmd("k1", "flight/7", "book"))
			_, err := rt.Execute(context.Background(), rtAccount, turn, h)
			is.True(errors.Is(err, turnframe.ErrInvalid))                      // a nil handler is invalid
			is.Equal(rtEntry(t, store, "k1").Status, turnframe.JournalPending) // and nothing ran, nothing was written
		})
	}
}

// Mux.Register "panics — a programming error, not an input — ... when h is
// nil". A nil HandlerFunc is a nil h: it was registered, and every command
// of its name then "panicked" in Execute and became an unknown outcome — the
// very thing a Mux promises a name never gets ("never a panic, never an
// unknown outcome") — though nothing ran.
func TestMuxRegisterPanicsOnANilHandlerOfAConcreteType(t *testing.T) {
	is := is.New(t)
	var book turnframe.HandlerFunc // assigned later, in the app's init order; nil here
	msg := func() (msg string) {
		defer func() { msg, _ = recover().(string) }()
		var m turnframe.Mux
		m.Register("book", book)
		return ""
	}()
	is.True(strings.Contains(msg, "nil handler")) // found at start-up
}

// New, NewDispatcher and NewRecovery panic on a nil store. A nil
// *sqlitestore.Store — Open's result when the app logged its error and went
// on — is a nil store too: it was taken, and the first call through it
// panicked, on Run's release goroutine where the app cannot recover it.
func TestTheConstructorsPanicOnANilStoreOfAConcreteType(t *testing.T) {
	var store *sqlitestore.Store // Open failed; the error was only logged
	sender := turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
		return turnframe.Dispatched{Kind: turnframe.DispatchCompleted}
	})
	for name, build := range map[string]func(){
		"New":           func() { turnframe.New(store) },
		"NewDispatcher": func() { turnframe.NewDispatcher(store, sender, turnframe.DispatchConfig{WorkerID: "w1"}) },
		"NewRecovery":   func() { turnframe.NewRecovery(store) },
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			msg := func() (msg string) {
				defer func() { msg, _ = recover().(string) }()
				build()
				return ""
			}()
			is.True(strings.Contains(msg, "nil store")) // a programmer error, found at start-up
		})
	}
}

// nilMeter is an Observer as an adapter builds one: a pointer its
// constructor returns with an error.
type nilMeter struct{ counts map[turnframe.Signal]int }

func (m *nilMeter) Observe(s turnframe.Signal, _ turnframe.Labels, _ time.Duration) { m.counts[s]++ }

// WithObserver: "A nil o keeps the default, which discards." A nil
// *Observer (otelturnframe.NewObserver's error ignored) was kept, and every
// signal — each command, each send — panicked in Observe and was logged at
// error level with a stack.
func TestANilObserverOfAConcreteTypeKeepsTheDefault(t *testing.T) {
	is := is.New(t)
	store := memstoreFor(t)
	var meter *nilMeter // the constructor failed
	var logs strings.Builder
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rt := turnframe.New(store, turnframe.WithObserver(meter), turnframe.WithLogger(logger))
	turn := rtPlanned(t, rt, rtAccount, rtCmd("b1", "order-1", "book"))
	_, err := rt.Execute(context.Background(), rtAccount, turn, rtNewHandler(rtScript))
	is.NoErr(err)
	is.Equal(strings.Count(logs.String(), "observer panicked"), 0) // a nil observer discards, as the doc says
}

// nilHandler is a RecoveryHandler an app builds as a pointer.
type nilHandler struct{ answerLog }

// Recover and Run are ErrInvalid for a nil handler, and a nil pointer
// behind the interface is one: it was taken, and every decision's call
// panicked into a turn's failure.
func TestRecoveryRefusesANilHandlerOfAConcreteType(t *testing.T) {
	is := is.New(t)
	var h *nilHandler
	rec := turnframe.NewRecovery(memstoreFor(t))
	_, err := rec.Recover(context.Background(), turnframe.RecoveryScope{}, h)
	is.True(errors.Is(err, turnframe.ErrInvalid)) // Recover: a nil handler
	err = rec.Run(context.Background(), turnframe.RecoveryLoop{Handler: h})
	is.True(errors.Is(err, turnframe.ErrInvalid)) // Run: the same
}

// nilVerifier is a Verifier an app builds as a pointer.
type nilVerifier struct{}

func (*nilVerifier) Verify(context.Context, turnframe.Uncertain) turnframe.Verification {
	return turnframe.Verification{}
}

// Remote.Verifier: "if not nil, looks an effect up by key". A nil pointer
// behind it said the remote could be asked, and every lookup panicked
// until the policy escalated.
func TestARemoteWithANilVerifierOfAConcreteTypeCannotBeAsked(t *testing.T) {
	is := is.New(t)
	var v *nilVerifier
	is.Equal(turnframe.Remote{Verifier: v}.Kind(), turnframe.RemoteNeither)                               // nothing to ask
	is.Equal(turnframe.Remote{Verifier: v, Deduplicates: time.Hour}.Kind(), turnframe.RemoteDeduplicates) // what else it declares stands
}
