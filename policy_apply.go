package turnframe

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// applyPolicy carries out the policy's next step for one OutcomeUnknown
// entry or row. phase is the entry's turn's phase (PhaseUnset for a row).
func (r *Recovery) applyPolicy(ctx context.Context, u Uncertain, phase TurnPhase) PolicyResult {
	remote, declared := r.cfg.remoteFor(u.Subject.Kind, u.Name)
	res := PolicyResult{Uncertain: u, Kind: RemoteUndeclared, Outcome: PolicyLeft}
	if declared {
		res.Kind = remote.Kind()
	}
	history, err := r.historyOf(ctx, u.Subject)
	if err != nil {
		res.Err = err
		return res
	}
	t := trailOf(history)
	st := nextStep(remote, declared, u, t, r.cfg.now())
	abandonedCommand := u.Subject.Kind == SubjectJournal && phase == PhaseAbandoned
	if st.kind == stepResend && abandonedCommand {
		st = step{kind: stepEscalate, code: CodeNoSafeResolution,
			note: "its turn was abandoned, so nothing will run it again, and nobody can tell whether it acted"}
	}
	switch st.kind {
	case stepWait:
		res.Outcome, res.NextAt = PolicyWaiting, st.at
	case stepResend:
		res = r.policySettle(ctx, res, Decision{Verdict: VerdictResend, Code: st.code, Note: st.note}, PolicyResent)
	case stepEscalate:
		res = r.policySettle(ctx, res, Decision{Verdict: VerdictEscalate, Code: st.code, Note: st.note}, PolicyEscalated)
	case stepVerify:
		res = r.verify(ctx, res, remote, t, abandonedCommand)
	}
	return res
}

// policySettle writes d as the policy's and reports outcome.
func (r *Recovery) policySettle(ctx context.Context, res PolicyResult, d Decision, outcome PolicyOutcome) PolicyResult {
	d.Actor = ActorPolicy
	d.Note = keepable(d.Note, MaxNoteLen) // the library's words around a Verifier's or a panic's: never refused
	res.Outcome, res.Code = outcome, d.Code
	res.Err = r.settle(ctx, res.Uncertain.Subject, d, fenceOf(res.Uncertain))
	attrs := []slog.Attr{slog.String("subject", res.Uncertain.Subject.Kind.String()), slog.String("ref", res.Uncertain.Subject.Ref),
		slog.String("name", res.Uncertain.Name), slog.String("outcome", outcome.String()), slog.String("code", d.Code)}
	switch {
	case res.Err != nil:
		r.obs.logf(ctx, slog.LevelWarn, "turnframe: policy could not write its resolution; a later Recover looks again",
			append(attrs, slog.String("error", res.Err.Error()))...)
	case outcome == PolicyEscalated:
		r.obs.logf(ctx, slog.LevelWarn, "turnframe: an unknown outcome needs intervention", attrs...)
	default:
		r.obs.logf(ctx, slog.LevelInfo, "turnframe: policy resolved an unknown outcome", attrs...)
	}
	return res
}

// verify asks the Verifier once, under VerifyTimeout, and acts on what it
// found. A lookup that cannot tell is recorded as evidence; the last one
// allowed escalates.
func (r *Recovery) verify(ctx context.Context, res PolicyResult, remote Remote, t trail, abandonedCommand bool) PolicyResult {
	u := res.Uncertain
	found, why := r.lookup(ctx, remote, u)
	switch found.Found {
	case FoundHappened:
		return r.policySettle(ctx, res, Decision{Verdict: VerdictCompleted, Code: CodeVerifiedHappened,
			RemoteRef: found.RemoteRef, Note: found.Note}, PolicyCompleted)
	case FoundNotHappened:
		if abandonedCommand {
			return r.policySettle(ctx, res, Decision{Verdict: VerdictFailed, Code: CodeVerifiedNotHappened,
				Note: "the remote never received it, and its turn was abandoned"}, PolicyRejected)
		}
		if resendsOf(u, t) >= remote.Resends {
			return r.policySettle(ctx, res, Decision{Verdict: VerdictEscalate, Code: CodeResendsExhausted,
				Note: "the remote never received it, but the resends allowed are spent: every send went unanswered"}, PolicyEscalated)
		}
		return r.policySettle(ctx, res, Decision{Verdict: VerdictResend, Code: CodeVerifiedNotHappened, Note: found.Note}, PolicyResent)
	}
	now := r.cfg.now()
	unsure := NewEvidence(u.Subject, "", ActorPolicy, CodeVerifyUnsure, "", why, now)
	unsure.Attempt = u.attemptName() // the lookup was about this attempt: a later one's trail does not count it
	if err := r.store.RecordEvidence(ctx, unsure); err != nil {
		res.Err = fmt.Errorf("record an unsure lookup: %w", err)
		return res // not counted: the next Recover asks again, within the bound of what was recorded
	}
	t.tries++
	if t.tries >= remote.VerifyTries {
		return r.policySettle(ctx, res, Decision{Verdict: VerdictEscalate, Code: CodeVerifyExhausted,
			Note: "the remote could not tell after every lookup allowed; last: " + why}, PolicyEscalated)
	}
	res.Outcome, res.NextAt = PolicyUnsure, now.Add(verifyBackoff(remote.VerifyBackoff, t.tries))
	return res
}

// lookup calls the Verifier through callWithin. A hang, a panic or an
// answer out of range is FoundUnsure, and why says which; a late answer is
// recorded as evidence, never acted on. A reference no store would keep is
// dropped; the Verifier's code goes at the head of its note, and the note is
// made keepable (invalid UTF-8 and NUL bytes replaced, cut to MaxNoteLen),
// so that no answer's words can refuse the record that counts the lookup.
func (r *Recovery) lookup(ctx context.Context, remote Remote, u Uncertain) (Verification, string) {
	late := func(b bounded[Verification]) { r.lateLookup(ctx, u, b) }
	call := callWithin(ctx, remote.VerifyTimeout, func(vctx context.Context) Verification {
		return remote.Verifier.Verify(vctx, u)
	}, late)
	attrs := []slog.Attr{slog.String("subject", u.Subject.Kind.String()), slog.String("ref", u.Subject.Ref), slog.String("name", u.Name)}
	switch {
	case call.end == callTimedOut:
		r.obs.logf(ctx, slog.LevelWarn, "turnframe: verifier did not answer in time", append(attrs, slog.Any("cause", call.cause))...)
		return Verification{}, "the verifier did not answer in time"
	case call.end == callPanicked:
		r.obs.logf(ctx, slog.LevelError, "turnframe: verifier panicked",
			append(attrs, slog.Any("panic", call.panic), slog.String("stack", string(call.stack)))...)
		return Verification{}, fmt.Sprintf("the verifier panicked: %v", call.panic)
	case call.value.Found > FoundNotHappened:
		r.obs.logf(ctx, slog.LevelError, "turnframe: verifier answered a finding out of range", append(attrs, slog.Int("finding", int(call.value.Found)))...)
		return Verification{}, fmt.Sprintf("the verifier answered finding %d, which is none", call.value.Found)
	}
	v := call.value
	if checkString("remote_ref", v.RemoteRef, 0, MaxRemoteRefLen) != nil {
		v.RemoteRef = ""
	}
	if v.Code != "" {
		v.Note = strings.TrimSuffix("("+v.Code+") "+v.Note, " ")
	}
	v.Note = keepable(v.Note, MaxNoteLen)
	if v.Found == FoundUnsure {
		why := "the remote could not tell"
		if v.Note != "" {
			why += ": " + v.Note
		}
		return v, why
	}
	return v, ""
}

// lateLookup records an answer a Verifier gave after its deadline as
// evidence that moves nothing.
func (r *Recovery) lateLookup(ctx context.Context, u Uncertain, b bounded[Verification]) {
	note := "a lookup answered after its deadline: " + b.value.Found.String()
	if b.end == callPanicked {
		note = fmt.Sprintf("a lookup panicked after its deadline: %v", b.panic)
	}
	recordLateAnswer(ctx, r.store, r.obs, r.cfg.now(), u.Subject, ActorPolicy, b.value.RemoteRef, note)
}

// historyOf reads the whole history of subject, oldest first.
func (r *Recovery) historyOf(ctx context.Context, subject Subject) ([]HistoryRecord, error) {
	var all []HistoryRecord
	var after int64
	for {
		page, err := r.store.History(ctx, subject, after, MaxLimit)
		if err != nil {
			return nil, fmt.Errorf("history of %v %s: %w", subject.Kind, subject.Ref, err)
		}
		all = append(all, page...)
		if len(page) < MaxLimit {
			return all, nil
		}
		after = page[len(page)-1].Seq
	}
}
