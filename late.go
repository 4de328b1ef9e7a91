package turnframe

import (
	"context"
	"log/slog"
	"time"
)

// lateRecordTimeout bounds the write of one piece of late evidence.
const lateRecordTimeout = 5 * time.Second

// recordLateAnswer appends evidence of an answer that came too late to
// count — after its deadline, or after its claim was lost — to subject's
// history, and emits SignalLateAnswer. It moves nothing. It may run on a
// late call's goroutine after the caller returned, so it writes under a
// context of its own, detached from the caller's and bounded; a store that
// refuses (closed, busy, the subject gone) only costs a log line.
func recordLateAnswer(ctx context.Context, store HistoryStore, obs observer, now time.Time, subject Subject, actor Actor, remoteRef, note string) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lateRecordTimeout)
	defer cancel()
	err := store.RecordEvidence(wctx, NewEvidence(subject, "", actor, CodeLateAnswer, remoteRef, note, now))
	outcome := "recorded"
	if err != nil {
		outcome = "unrecorded"
		obs.logf(ctx, slog.LevelWarn, "turnframe: a late answer could not be recorded as evidence",
			slog.String("subject", subject.Kind.String()), slog.String("ref", subject.Ref),
			slog.String("note", note), slog.String("error", err.Error()))
	}
	obs.count(SignalLateAnswer, Labels{Outcome: outcome})
}
