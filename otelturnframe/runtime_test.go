package otelturnframe_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// tee passes every signal to obs and tells lateAnswers of each late
// answer, which the dispatcher records on the late send's goroutine.
type tee struct {
	obs         turnframe.Observer
	lateAnswers chan struct{}
}

func (t tee) Observe(s turnframe.Signal, l turnframe.Labels, d time.Duration) {
	t.obs.Observe(s, l, d)
	if s == turnframe.SignalLateAnswer {
		t.lateAnswers <- struct{}{}
	}
}

func TestARealRuntimeAndDispatcherFeedTheInstruments(t *testing.T) {
	is := is.New(t)
	obs, reader := newObserved(t)
	late := make(chan struct{}, 1)
	is.NoErr(runWorkload(context.Background(), tee{obs, late}, "all", late)) // workload, its late answer recorded

	points := collect(t, reader)
	counts := map[string]int64{}
	for _, p := range points {
		counts[p.key()] = p.count
	}
	send := "messaging.operation.name=send,messaging.operation.type=send,messaging.system=turnframe"
	process := "messaging.operation.name=process,messaging.operation.type=process,messaging.system=turnframe"
	want := map[string]int64{
		"messaging.client.operation.duration{messaging.destination.name=ok," + send + "}":                           1,
		"messaging.client.operation.duration{error.type=retryable,messaging.destination.name=flaky," + send + "}":   1,
		"messaging.client.operation.duration{error.type=permanent,messaging.destination.name=refused," + send + "}": 1,
		"messaging.client.operation.duration{error.type=unknown,messaging.destination.name=slow," + send + "}":      1,

		"messaging.client.sent.messages{messaging.destination.name=ok," + send + ",turnframe.outcome=completed}":                                            1,
		"messaging.client.sent.messages{error.type=http.503,messaging.destination.name=flaky," + send + ",turnframe.outcome=retried}":                       1,
		"messaging.client.sent.messages{error.type=http.400,messaging.destination.name=refused," + send + ",turnframe.outcome=failed}":                      1,
		"messaging.client.sent.messages{error.type=turnframe.dispatch.send_timeout,messaging.destination.name=slow," + send + ",turnframe.outcome=unknown}": 1,

		"messaging.process.duration{" + process + ",turnframe.command=order,turnframe.outcome=commit}":  1,
		"messaging.process.duration{" + process + ",turnframe.command=refuse,turnframe.outcome=reject}": 1,

		"turnframe.command.committed{turnframe.command=order}":                                                                  1,
		"turnframe.command.rejected{turnframe.command=refuse,turnframe.outcome=sold_out}":                                       1,
		"turnframe.external.outcome_unknown{messaging.destination.name=slow,turnframe.outcome=turnframe.dispatch.send_timeout}": 1,
		"turnframe.late_answer{turnframe.outcome=recorded}":                                                                     1,
		"turnframe.outbox.claimed{messaging.destination.name=flaky}":                                                            1,
		"turnframe.outbox.claimed{messaging.destination.name=ok}":                                                               1,
		"turnframe.outbox.claimed{messaging.destination.name=refused}":                                                          1,
		"turnframe.outbox.claimed{messaging.destination.name=slow}":                                                             1,
	}
	is.Equal(counts, want) // every point, with its attributes and count

	for _, p := range points {
		if p.histogram {
			is.Equal(p.unit, "s") // durations in seconds
			is.True(p.sum > 0)    // a real duration was recorded
		}
	}
	for _, p := range find(points, "messaging.client.sent.messages") {
		is.Equal(p.unit, "{message}") // the conventions' unit
	}
}
