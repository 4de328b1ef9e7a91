package main

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"

	"github.com/turnframe/turnframe"
)

// The page's writes make the moves the commands make, through the same
// calls: settle through parseSettle and settleRow or settleEntry
// (Recovery.Settle), requeue through requeueFence and the store's Requeue,
// approve and deny through parseApproval and Runtime.Approve or
// Runtime.Deny. Each returns the line the command would print, or the
// error it would report.

// commandEnv is the env a write runs its command's code with: its output
// goes to out, its warnings to the ui's stderr.
func (s *uiServer) commandEnv(out *bytes.Buffer) *env {
	return &env{stdout: out, stderr: s.e.stderr, now: s.e.now, page: s.e.page}
}

// settle settles an outbox row (kind=row, id) or a journal entry
// (kind=entry, account, key) with verdict and note, as 'turnframe settle'
// does.
func (s *uiServer) settle(r *http.Request) (string, error) {
	// attempt is the one the page showed: a row or entry sent again since
	// it was drawn is refused (409), its new outcome unseen.
	f := settleFlags{note: r.PostFormValue("note"), actor: string(s.opts.actor), attempt: r.PostFormValue("attempt")}
	var args []string
	switch r.PostFormValue("kind") {
	case "row":
		args = []string{r.PostFormValue("id")}
	case "entry":
		f.account = r.PostFormValue("account")
		if f.account == "" {
			return "", usagef("the form names no account")
		}
		args = []string{r.PostFormValue("key")}
	default:
		return "", usagef("the form says neither a row nor a journal entry")
	}
	args = append(args, r.PostFormValue("verdict"))
	req, err := parseSettle(args, f)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	e := s.commandEnv(&out)
	rec := turnframe.NewRecovery(s.store, turnframe.WithClock(e.now), turnframe.WithLogger(warnLogger(e.stderr)))
	if req.entry {
		err = settleEntry(r.Context(), e, s.store, rec, req, s.db)
	} else {
		err = settleRow(r.Context(), e, s.store, rec, req, s.db)
	}
	return strings.TrimSpace(out.String()), err
}

// requeue sends the failed outbox row id again, with a fresh attempt
// budget, as 'turnframe requeue --attempt' does: only while the row is still
// failed at the attempts the form carries (the ones the page showed), else
// 409, nothing changed.
func (s *uiServer) requeue(r *http.Request) (string, error) {
	id, err := parseOutboxID([]string{r.PostFormValue("id")}, "the id of an outbox row")
	if err != nil {
		return "", err
	}
	attempts := r.PostFormValue("attempts")
	if attempts == "" {
		return "", usagef("the form carries no attempts (was it drawn by an older turnframe? reload the page)")
	}
	fence, err := parseRequeueFence(attempts, "the form's attempts")
	if err != nil {
		return "", err
	}
	before, err := s.store.GetOutbox(r.Context(), id)
	if err != nil {
		return "", noRow(id, err)
	}
	if err := fence.check(before); err != nil {
		return "", err
	}
	if err := requeuable(before); err != nil {
		return "", err
	}
	if err := s.store.Requeue(r.Context(), id, before.Attempts, s.e.now()); err != nil {
		return "", explainWrite(err, s.db)
	}
	return fmt.Sprintf("requeued %s: failed (%s) → pending, due now, with a fresh attempt budget after %d attempt(s)",
		id, cell(before.LastCode), before.Attempts), nil
}

// approval approves (approve true) or denies the command the account
// admitted under key, with a note, as 'turnframe approve' and 'turnframe
// deny' do.
func (s *uiServer) approval(approve bool) func(*http.Request) (string, error) {
	return func(r *http.Request) (string, error) {
		note := r.PostFormValue("note")
		acct, key, who, err := parseApproval([]string{r.PostFormValue("key")}, r.PostFormValue("account"), string(s.opts.actor), note)
		if err != nil {
			return "", err
		}
		before, err := s.store.ByKey(r.Context(), acct, key)
		if err != nil {
			return "", noEntry(acct, key, err)
		}
		rt := turnframe.New(s.store, turnframe.WithClock(s.e.now), turnframe.WithLogger(warnLogger(s.e.stderr)))
		decide, verb := rt.Approve, "approved"
		if !approve {
			decide, verb = rt.Deny, "denied"
		}
		after, err := decide(r.Context(), acct, key, who, note)
		if err != nil {
			return "", explainWrite(err, s.db)
		}
		return fmt.Sprintf("%s journal entry %s (account %s, command %s, turn %s): %s → %s by %s (code %s)", verb,
			cell(string(key)), cell(string(acct)), cell(before.Name), after.Turn, before.Status, after.Status, cell(string(who)),
			cell(after.Code)), nil
	}
}
