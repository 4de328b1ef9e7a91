package turnframe_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
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
