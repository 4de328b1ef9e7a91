package turnframe

import (
	"context"
	"errors"
	"fmt"
)

// The codes an approval and a denial leave on the entry and in its history.
const (
	// CodeApproved is the code of an entry Runtime.Approve moved from
	// AwaitingApproval to Pending; its next attempt clears it.
	CodeApproved = "turnframe.approval.approved"
	// CodeDenied is the code of an entry Runtime.Deny moved from
	// AwaitingApproval to Rejected: the command never ran.
	CodeDenied = "turnframe.approval.denied"
)

// ApprovalSettlement returns the settlement that approves (to Pending, with
// CodeApproved) or denies (to Rejected, with CodeDenied) the entry under
// key. It is the only settlement storekit.NextEntry accepts for an AwaitingApproval
// entry.
func ApprovalSettlement(key IdempotencyKey, approve bool) Settlement {
	if approve {
		return Settlement{Key: key, To: JournalPending, Code: CodeApproved}
	}
	return Settlement{Key: key, To: JournalRejected, Code: CodeDenied}
}

// Approve approves the command account admitted under key, which awaits
// approval (Command.NeedsApproval): the entry moves to Pending with
// CodeApproved, and a history record names actor ("" is ActorApp) and
// note, in one transaction. It does not run the command: the next
// Runtime.Execute of the entry's turn (the returned entry's Turn) does, also
// when that turn was committed or delivered meanwhile, and recovery resumes
// it (ActionResumeCommands) if the process dies first.
//
// Errors: ErrInvalid for a bad account, key, actor or note (at most
// MaxNoteLen bytes), or an actor that may not intervene (recovery, policy,
// a worker); ErrNotFound for a key account never used; ErrConflict for an
// entry that is not awaiting approval (approved or denied already, or it
// never needed it), or whose turn was abandoned (deny it instead). Nothing
// is written on any error; a crash leaves the entry awaiting or approved.
// An entry a new turn's plan adopts from its abandoned turn while it is
// being approved is approved on that turn (it is the same command); one
// adopted again at each of three tries is ErrConflict naming where it is,
// and a failed read of it after such a refusal is that read's error
// (ErrBusy: try again), never ErrNotFound.
func (rt *Runtime) Approve(ctx context.Context, account AccountID, key IdempotencyKey, actor Actor, note string) (JournalEntry, error) {
	e, err := rt.decideApproval(ctx, account, key, actor, note, true)
	if err != nil {
		return e, fmt.Errorf("approve %q: %w", key, err)
	}
	return e, nil
}

// Deny denies the command account admitted under key, which awaits
// approval: the entry moves to Rejected with CodeDenied, and a history
// record names actor ("" is ActorApp) and note, in one transaction. The
// command never runs. Errors as Approve's, except that a denial on an
// abandoned turn is allowed.
func (rt *Runtime) Deny(ctx context.Context, account AccountID, key IdempotencyKey, actor Actor, note string) (JournalEntry, error) {
	e, err := rt.decideApproval(ctx, account, key, actor, note, false)
	if err != nil {
		return e, fmt.Errorf("deny %q: %w", key, err)
	}
	return e, nil
}

// decideApproval checks the input, reads the entry for its turn and applies
// ApprovalSettlement; the store's storekit.NextEntry refuses an entry that is not
// awaiting approval any more. An entry a new turn's plan adopted from its
// abandoned turn between the read and the write (the store then finds no
// entry of the key in the turn read) is read again and decided on its new
// turn: it is the same command, still awaiting.
func (rt *Runtime) decideApproval(ctx context.Context, account AccountID, key IdempotencyKey, actor Actor, note string, approve bool) (JournalEntry, error) {
	if err := checkApprovalInput(account, key, actor, note); err != nil {
		return JournalEntry{}, err
	}
	e, err := rt.store.ByKey(ctx, account, key)
	if err != nil {
		return JournalEntry{}, err
	}
	for try := 1; ; try++ {
		if e.Status != JournalAwaitingApproval {
			return e, fmt.Errorf("%w: entry is %v, not awaiting approval", ErrConflict, e.Status)
		}
		applied, err := rt.store.Apply(ctx, Write{
			Account: account, Turn: e.Turn, Actor: actor, Note: note, Now: rt.cfg.now(),
			Settle: []Settlement{ApprovalSettlement(key, approve)},
		})
		if err == nil {
			return applied.Settled[0], nil
		}
		if !errors.Is(err, ErrNotFound) {
			return e, err
		}
		// The key exists (it was read above): from here on, ErrNotFound
		// would tell the person deciding that the command does not.
		again, rerr := rt.store.ByKey(ctx, account, key)
		switch {
		case rerr != nil:
			return e, fmt.Errorf("%w (reading the entry again after its decision on turn %v was refused: %v)", rerr, e.Turn, err)
		case again.Turn == e.Turn:
			return e, err
		case try == approvalTries:
			return again, fmt.Errorf("%w: entry moved to turn %v while it was decided, %d times: decide it there (%v)", ErrConflict, again.Turn, try, err)
		}
		e = again // adopted by a new turn meanwhile: decide it there
	}
}

// approvalTries bounds how often a decision follows an entry adopted by a
// new turn while it was being decided.
const approvalTries = 3

func checkApprovalInput(account AccountID, key IdempotencyKey, actor Actor, note string) error {
	if err := account.Validate(); err != nil {
		return err
	}
	if err := key.ValidateStored(); err != nil {
		return err
	}
	if actor != "" {
		if err := actor.Validate(); err != nil {
			return err
		}
		if !actor.MayIntervene() {
			return invalid("actor", "%q may not approve or deny: only the app or a person does", actor)
		}
	}
	return checkString("note", note, 0, MaxNoteLen)
}
