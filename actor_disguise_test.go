package turnframe_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/memstore"
)

// disguisedActors are actors that look like turnframe's own, or like
// another person, wherever they are shown without escaping: a log, a
// dashboard, a page, a terminal. Each hides a rune that prints as nothing
// or changes how the rest prints.
var disguisedActors = []turnframe.Actor{
	"recovery\u200b",       // a zero-width space
	"\u2060policy",         // a word joiner
	"operator\ufeff",       // a byte-order mark
	"operator:\u202eecila", // a right-to-left override: drawn "operator:alice"
	"app\u00ad",            // a soft hyphen
	"operator\u00a0",       // a no-break space
	"recovery ",            // a trailing space
	" operator",            // a leading space
	"worker:w1\u2028",      // a line separator
	"app:\U000f0000",       // a private-use character
}

func TestAnActorIsPrintableAsItIs(t *testing.T) {
	for _, a := range disguisedActors {
		t.Run(string(a), func(t *testing.T) {
			is := is.New(t)
			is.True(errors.Is(a.Validate(), turnframe.ErrInvalid)) // refused: it would pass for another
		})
	}
	for _, a := range []turnframe.Actor{"operator:Zoë", "app:billing-ui", "operator:李", "operator:alice smith", turnframe.ActorOperator, turnframe.WorkerActor("host-1")} {
		t.Run(string(a), func(t *testing.T) {
			is := is.New(t)
			is.NoErr(a.Validate()) // letters of any script, inner spaces: as they print
		})
	}
}

// TestADisguisedActorIsRefusedAtEveryDoor proves that an application cannot
// put a disguised actor on the audit trail: Approve, Deny, Settle and a
// direct Store.Apply refuse it before anything is written.
func TestADisguisedActorIsRefusedAtEveryDoor(t *testing.T) {
	const disguised turnframe.Actor = "recovery\u200b"
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		clock := newPolClock(dispNow)
		turn := polUnknownCommand(t, store, clock)
		rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.Now))
		err := rec.Settle(ctx, turnframe.JournalSubject(rtAccount, "k-charge"), turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: disguised})
		is.True(errors.Is(err, turnframe.ErrInvalid))                                   // Settle refuses it
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalOutcomeUnknown) // unmoved
		_, err = store.Apply(ctx, turnframe.Write{Account: rtAccount, Turn: turn, Now: clock.Now(), Actor: disguised,
			Settle: []turnframe.Settlement{{Key: "k-charge", From: turnframe.JournalOutcomeUnknown, To: turnframe.JournalCommitted}}})
		is.True(errors.Is(err, turnframe.ErrInvalid)) // so does the store

		rt := turnframe.New(store, turnframe.WithClock(clock.Now))
		rtPlanned(t, rt, rtAccount, apPay("k-pay"), apPay("k-pay-2"))
		_, err = rt.Approve(ctx, rtAccount, "k-pay", disguised, "")
		is.True(errors.Is(err, turnframe.ErrInvalid)) // Approve refuses it
		_, err = rt.Deny(ctx, rtAccount, "k-pay-2", "operator\u200b", "")
		is.True(errors.Is(err, turnframe.ErrInvalid)) // and Deny
		is.Equal(rtEntry(t, store, "k-pay").Status, turnframe.JournalAwaitingApproval)
		is.Equal(rtEntry(t, store, "k-pay-2").Status, turnframe.JournalAwaitingApproval)
	})
}

// TestSettleRefusesTurnframesOwnActors proves that an application cannot
// settle an unknown outcome in the name of turnframe's own recovery,
// policy or dispatch workers: the trail would say the policy resolved what
// the application did, and the policy counts its own resends by that name.
func TestSettleRefusesTurnframesOwnActors(t *testing.T) {
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		clock := newPolClock(dispNow)
		polUnknownCommand(t, store, clock)
		row := polUnknownRow(t, store, "k-row", "payments")
		rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.Now))
		entry, rowSubject := turnframe.JournalSubject(rtAccount, "k-charge"), turnframe.OutboxSubject(rtAccount, row.ID)
		before := func(s turnframe.Subject) int {
			h, err := store.History(ctx, s, 0, 100)
			is.NoErr(err)
			return len(h)
		}
		entryRecords, rowRecords := before(entry), before(rowSubject)
		for _, actor := range []turnframe.Actor{turnframe.ActorPolicy, turnframe.ActorRecovery, turnframe.WorkerActor("w1")} {
			for _, s := range []turnframe.Subject{entry, rowSubject} {
				for _, v := range []turnframe.Verdict{turnframe.VerdictCompleted, turnframe.VerdictResend, turnframe.VerdictEscalate} {
					err := rec.Settle(ctx, s, turnframe.Decision{Verdict: v, Actor: actor})
					is.True(errors.Is(err, turnframe.ErrInvalid)) // not the application's name to use
				}
			}
		}
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalOutcomeUnknown) // unmoved
		is.Equal(dispGet(t, store, row.ID).Status, turnframe.OutboxOutcomeUnknown)
		is.Equal(before(entry), entryRecords) // nothing recorded
		is.Equal(before(rowSubject), rowRecords)
		is.NoErr(rec.Settle(ctx, entry, turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: turnframe.ActorOperator}))
		is.NoErr(rec.Settle(ctx, rowSubject, turnframe.Decision{Verdict: turnframe.VerdictCompleted})) // the app, or a person, may
	})
}

// TestAWorkerIDIsOneItsActorCanName proves that every worker id a store
// or a Dispatcher accepts makes an actor the audit trail accepts: the
// records a claim, a settlement or a late answer writes under
// WorkerActor(id) are never refused for the id, and so never lost.
func TestAWorkerIDIsOneItsActorCanName(t *testing.T) {
	long := strings.Repeat("w", turnframe.MaxNameLen-len("worker:"))
	for _, id := range []string{"w1\u200b", "w\u202e1", "w1 ", " w1", "w1\t", "w1\n", long + "w"} {
		t.Run(id, func(t *testing.T) {
			is := is.New(t)
			is.True(errors.Is(turnframe.CheckWorker(id), turnframe.ErrInvalid)) // refused: its actor would be
			panicked := func() (p bool) {
				defer func() { p = recover() != nil }()
				turnframe.NewDispatcher(memstore.New(), turnframe.SenderFunc(func(context.Context, turnframe.OutboxEntry) turnframe.Dispatched {
					return turnframe.Dispatched{}
				}), turnframe.DispatchConfig{WorkerID: id})
				return false
			}()
			is.True(panicked) // a Dispatcher refuses it at construction, not at its first late answer
		})
	}
	for _, id := range []string{"w1", "host-1/pid 42", "工人", long} {
		t.Run(id, func(t *testing.T) {
			is := is.New(t)
			is.NoErr(turnframe.CheckWorker(id))            // accepted
			is.NoErr(turnframe.WorkerActor(id).Validate()) // and so is its actor
		})
	}
}

// blankActors are actors strconv.IsPrint takes rune by rune, yet that a
// terminal or a browser draws as turnframe's own or as another person:
// each hides a rune drawn as nothing (a combining grapheme joiner, a
// variation selector) or as a blank (a Hangul filler, the Braille blank).
var blankActors = []turnframe.Actor{
	"recovery\u034f",       // a combining grapheme joiner
	"policy\ufe0f",         // a variation selector
	"operator\U000e0100",   // a variation selector past the BMP
	"recovery\u3164",       // a Hangul filler, drawn blank
	"\u115fpolicy",         // a Hangul choseong filler
	"operator:al\u17b4ice", // a Khmer inherent vowel, drawn as nothing
	"recovery\u2800",       // the Braille blank
	"app\u180b",            // a Mongolian variation selector
}

// TestAnActorDrawnAsAnotherIsRefused proves that Validate refuses an actor
// holding a printable rune that is drawn as nothing or as a blank, at every
// door: the actor itself, a worker id (its records are written as
// worker:<id>) and Recovery.Settle, which writes nothing.
func TestAnActorDrawnAsAnotherIsRefused(t *testing.T) {
	for _, a := range blankActors {
		t.Run(string(a), func(t *testing.T) {
			is := is.New(t)
			is.True(errors.Is(a.Validate(), turnframe.ErrInvalid))                     // refused: it is drawn as another
			is.True(errors.Is(turnframe.CheckWorker(string(a)), turnframe.ErrInvalid)) // so is a worker id holding it
		})
	}
	eachStore(t, func(t *testing.T, store turnframe.Store) {
		is := is.New(t)
		ctx := context.Background()
		clock := newPolClock(dispNow)
		polUnknownCommand(t, store, clock)
		rec := turnframe.NewRecovery(store, turnframe.WithClock(clock.Now))
		err := rec.Settle(ctx, turnframe.JournalSubject(rtAccount, "k-charge"), turnframe.Decision{Verdict: turnframe.VerdictCompleted, Actor: "recovery\u034f"})
		is.True(errors.Is(err, turnframe.ErrInvalid))                                   // Settle refuses it
		is.Equal(rtEntry(t, store, "k-charge").Status, turnframe.JournalOutcomeUnknown) // unmoved
	})
}
