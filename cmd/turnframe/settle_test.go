package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// lastRecord returns the newest record of subject's history.
func lastRecord(t *testing.T, store turnframe.HistoryStore, subject turnframe.Subject) turnframe.HistoryRecord {
	t.Helper()
	var last turnframe.HistoryRecord
	err := eachHistoryPage(context.Background(), store, subject, func(page []turnframe.HistoryRecord) error {
		last = page[len(page)-1]
		return nil
	})
	if err != nil {
		t.Fatalf("history of %v: %v", subject, err)
	}
	if last.Seq == 0 {
		t.Fatalf("no history of %v", subject)
	}
	return last
}

// escalate moves the fixture's unknown row and unknown entry to
// needs_intervention as the policy does: through the store, as
// ActorPolicy (Recovery.Settle takes no actor of turnframe's own).
func escalate(t *testing.T, f fixture) *sqlitestore.Store {
	t.Helper()
	store := openFixture(t, f)
	ctx := context.Background()
	const why = "the remote can do neither"
	now := time.Now().UTC()
	if err := store.Resolve(ctx, turnframe.Resolution{ID: f.unknown, Verdict: turnframe.VerdictEscalate, Actor: turnframe.ActorPolicy,
		Code: turnframe.CodeNoSafeResolution, Note: why, Now: now}); err != nil {
		t.Fatalf("escalate the row: %v", err)
	}
	_, err := store.Apply(ctx, turnframe.Write{Account: fixtureAccount, Turn: f.unknownDelivered, Now: now, Actor: turnframe.ActorPolicy, Note: why,
		Settle: []turnframe.Settlement{{Key: "key-ask-remote", From: turnframe.JournalOutcomeUnknown, To: turnframe.JournalNeedsIntervention, Code: turnframe.CodeNoSafeResolution}}})
	if err != nil {
		t.Fatalf("escalate the entry: %v", err)
	}
	return store
}

func TestSettle(t *testing.T) {
	t.Run("AnUnknownRowCompleted", func(t *testing.T) {
		is := is.New(t)
		f := mustFixture(t)
		code, out, stderr := cli(t, "settle", "--db", f.path, f.unknown.String(), "completed", "--ref", "ch_9")
		is.Equal(stderr, "")
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "outcome_unknown → completed by operator (code operator.completed, ref ch_9)"))
		store := openFixture(t, f)
		rec, err := store.GetOutbox(context.Background(), f.unknown)
		is.NoErr(err)
		is.Equal(rec.Status, turnframe.OutboxCompleted)
		is.Equal(rec.LastCode, "operator.completed")
		is.Equal(rec.RemoteRef, "ch_9") // the remote's reference, given by the operator
		last := lastRecord(t, store, turnframe.OutboxSubject(fixtureAccount, f.unknown))
		is.Equal(last.Actor, turnframe.ActorOperator) // the audit trail names who settled it
		is.Equal(last.To, "completed")
	})
	t.Run("WithAnAttemptOnlyThatAttemptIsSettled", func(t *testing.T) {
		is := is.New(t)
		f := mustFixture(t)
		rec, err := openFixture(t, f).GetOutbox(context.Background(), f.unknown)
		is.NoErr(err)
		seen := strconv.Itoa(rec.Attempts)
		code, _, stderr := cli(t, "settle", "--db", f.path, f.unknown.String(), "resend", "--attempt", strconv.Itoa(rec.Attempts+1))
		is.Equal(code, exitUsage) // sent again since: refused
		is.True(strings.Contains(stderr, "refused, nothing changed"))
		code, _, _ = cli(t, "settle", "--db", f.path, f.unknown.String(), "resend", "--attempt", "one")
		is.Equal(code, exitUsage) // not an attempt number
		rec, err = openFixture(t, f).GetOutbox(context.Background(), f.unknown)
		is.NoErr(err)
		is.Equal(rec.Status, turnframe.OutboxOutcomeUnknown) // unchanged
		code, _, stderr = cli(t, "settle", "--db", f.path, f.unknown.String(), "resend", "--attempt", seen)
		is.Equal(stderr, "")
		is.Equal(code, exitOK) // the attempt looked at
		code, _, _ = cli(t, "settle", "--db", f.path, "--account", "acme", "key-ask-remote", "completed", "--attempt", "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3")
		is.Equal(code, exitUsage) // an entry at another attempt
	})
	t.Run("ARowThatIsNotUnknownExits2Unchanged", func(t *testing.T) {
		is := is.New(t)
		f := mustFixture(t)
		code, _, stderr := cli(t, "settle", "--db", f.path, f.failed.String(), "resend", "--code", "x")
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "refused, nothing changed"))
		is.True(strings.Contains(stderr, "is failed; only an outcome_unknown or needs_intervention row is resolved"))
		rec, err := openFixture(t, f).GetOutbox(context.Background(), f.failed)
		is.NoErr(err)
		is.Equal(rec.Status, turnframe.OutboxFailed)
	})
	t.Run("AnUnknownIDExits2", func(t *testing.T) {
		is := is.New(t)
		f := mustFixture(t)
		code, _, stderr := cli(t, "settle", "--db", f.path, "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3", "failed")
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "no outbox row 01J9Z3K8Q5R6S7T8V9W0X1Y2Z3"))
	})
	t.Run("AnEntryByAccountAndKey", func(t *testing.T) {
		is := is.New(t)
		f := mustFixture(t)
		code, out, stderr := cli(t, "settle", "--db", f.path, "--account", "acme", "key-ask-remote", "completed",
			"--ref", "remote-ref-7", "--note", "found in the remote's console")
		is.Equal(stderr, "")
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "settled journal entry key-ask-remote (account acme, command ask-remote, turn "+f.unknownDelivered.String()+")"))
		is.True(strings.Contains(out, "outcome_unknown → committed by operator"))
		store := openFixture(t, f)
		e, err := store.ByKey(context.Background(), fixtureAccount, "key-ask-remote")
		is.NoErr(err)
		is.Equal(e.Status, turnframe.JournalCommitted)
		is.Equal(e.RemoteRef, "remote-ref-7")
		last := lastRecord(t, store, turnframe.JournalSubject(fixtureAccount, "key-ask-remote"))
		is.Equal(last.Actor, turnframe.ActorOperator)
		is.Equal(last.Note, "found in the remote's console") // the note is in the audit trail
		is.Equal(last.From, "outcome_unknown")
		is.Equal(last.To, "committed")
	})
	t.Run("AKeyOfAnotherAccountExits2", func(t *testing.T) {
		is := is.New(t)
		f := mustFixture(t)
		code, _, stderr := cli(t, "settle", "--db", f.path, "--account", "someone-else", "key-ask-remote", "completed")
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "account someone-else has no journal entry under the key key-ask-remote"))
	})
	t.Run("AnEntryThatIsNotUnknownExits2Unchanged", func(t *testing.T) {
		is := is.New(t)
		f := mustFixture(t)
		code, _, stderr := cli(t, "settle", "--db", f.path, "--account", "acme", "key-ok", "failed")
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "refused, nothing changed"))
		e, err := openFixture(t, f).ByKey(context.Background(), fixtureAccount, "key-ok")
		is.NoErr(err)
		is.Equal(e.Status, turnframe.JournalCommitted) // unchanged
	})
	t.Run("EscalateByHand", func(t *testing.T) {
		is := is.New(t)
		f := mustFixture(t)
		code, out, _ := cli(t, "settle", "--db", f.path, f.unknown.String(), "escalate", "--note", "ask finance")
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "outcome_unknown → needs_intervention by operator"))
	})
	for _, actor := range []string{"policy", "recovery", "worker:web-1"} {
		t.Run("ARefusesTheActor_"+actor, func(t *testing.T) {
			is := is.New(t)
			f := mustFixture(t)
			code, stdout, stderr := cli(t, "settle", "--db", f.path, f.unknown.String(), "completed", "--actor", actor)
			is.Equal(code, exitUsage)
			is.Equal(stdout, "")
			is.True(strings.Contains(stderr, "may not settle by hand")) // it says why
			is.True(strings.Contains(stderr, "operator:alice"))         // and what to name instead
			rec, err := openFixture(t, f).GetOutbox(context.Background(), f.unknown)
			is.NoErr(err)
			is.Equal(rec.Status, turnframe.OutboxOutcomeUnknown) // unchanged
		})
	}
	// What the policy handed to a person, a person settles: a row and an
	// entry that need intervention, each by its own form, under a named
	// operator.
	t.Run("WhatNeedsIntervention", func(t *testing.T) {
		is := is.New(t)
		f := mustFixture(t)
		store := escalate(t, f)
		code, out, stderr := cli(t, "settle", "--db", f.path, f.unknown.String(), "resend", "--actor", "operator:alice")
		is.Equal(stderr, "")
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "needs_intervention → pending by operator:alice"))
		code, out, _ = cli(t, "settle", "--db", f.path, "--account", "acme", "key-ask-remote", "failed", "--code", "remote.never_got_it")
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "needs_intervention → rejected by operator (code remote.never_got_it)"))

		ctx := context.Background()
		rec, err := store.GetOutbox(ctx, f.unknown)
		is.NoErr(err)
		is.Equal(rec.Status, turnframe.OutboxPending) // due again, under the same key
		last := lastRecord(t, store, turnframe.OutboxSubject(fixtureAccount, f.unknown))
		is.Equal(last.Actor, turnframe.Actor("operator:alice"))
		e, err := store.ByKey(ctx, fixtureAccount, "key-ask-remote")
		is.NoErr(err)
		is.Equal(e.Status, turnframe.JournalRejected)
		is.Equal(e.Code, "remote.never_got_it")
	})
	t.Run("WhatNeedsInterventionIsNotEscalatedAgain", func(t *testing.T) {
		is := is.New(t)
		f := mustFixture(t)
		escalate(t, f)
		code, _, stderr := cli(t, "settle", "--db", f.path, f.unknown.String(), "escalate")
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "already needs intervention"))
	})
}

// settle's --attempt takes a row's attempt number or an entry's attempt id,
// "as 'turnframe show' prints them": 'turnframe show TURN' prints each of
// its journal entries' attempt id, and settling the entry with the one it
// printed goes through.
func TestShowPrintsTheEntrysAttemptIDThatSettleAttemptTakes(t *testing.T) {
	is := is.New(t)
	f := mustFixture(t)
	e, err := openFixture(t, f).ByKey(context.Background(), fixtureAccount, "key-ask-remote")
	is.NoErr(err)
	is.True(!e.Attempt.IsZero())
	code, stdout, _ := cli(t, "show", "--db", f.path, f.unknownDelivered.String())
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "ATTEMPT ID"))       // a column says which it is
	is.True(strings.Contains(stdout, e.Attempt.String())) // the id settle --attempt wants
	code, _, stderr := cli(t, "settle", "--db", f.path, "--account", "acme", "key-ask-remote", "completed", "--attempt", e.Attempt.String())
	is.Equal(stderr, "")
	is.Equal(code, exitOK) // the attempt show printed is the one settled
	code, stdout, _ = cli(t, "help", "settle")
	is.Equal(code, exitOK)
	is.True(strings.Contains(stdout, "ATTEMPT ID")) // the help says where to read it
}
