package turnframe_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

func TestIDGeneratorNeverGoesBackwards(t *testing.T) {
	is := is.New(t)
	gen := turnframe.NewIDGenerator()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const goroutines, perGoroutine = 8, 2000
	var wg sync.WaitGroup
	backwards := make(chan string, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last turnframe.EventID
			for i := range perGoroutine {
				// Clocks that disagree and step back: the generator must not care.
				now := base.Add(time.Duration((i*7+g*13)%5) * time.Millisecond)
				id := gen.EventID(now)
				if id.Compare(last) <= 0 {
					backwards <- id.String() + " after " + last.String()
					return
				}
				last = id
			}
		}()
	}
	wg.Wait()
	close(backwards)
	for msg := range backwards {
		t.Error(msg)
	}
	is.True(!gen.EventID(base).IsZero()) // a generated id is never zero
}

func TestIDGeneratorOrdersAcrossKinds(t *testing.T) {
	is := is.New(t)
	gen := turnframe.NewIDGeneratorFrom(bytes.NewReader(make([]byte, 1<<16)))
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a := gen.TurnID(now)
	b := gen.TurnID(now.Add(-time.Hour)) // the clock stepped back an hour
	is.Equal(a.Compare(b), -1)           // still after the last id
	is.Equal(a.Time(), now.Truncate(time.Millisecond))
}

func TestIDText(t *testing.T) {
	gen := turnframe.NewIDGenerator()
	id := gen.OutboxID(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	t.Run("RoundTripsThroughParse", func(t *testing.T) {
		is := is.New(t)
		parsed, err := turnframe.ParseOutboxID(id.String())
		is.NoErr(err)
		is.Equal(parsed, id)
		is.Equal(len(id.String()), 26) // 26-character text, readable in the sqlite3 shell
	})
	t.Run("RoundTripsThroughJSON", func(t *testing.T) {
		is := is.New(t)
		b, err := json.Marshal(struct{ ID turnframe.OutboxID }{id})
		is.NoErr(err)
		var back struct{ ID turnframe.OutboxID }
		is.NoErr(json.Unmarshal(b, &back))
		is.Equal(back.ID, id)
	})
	t.Run("BadTextIsInvalid", func(t *testing.T) {
		for _, s := range []string{"", "nope", id.String() + "X", "ZZZZZZZZZZZZZZZZZZZZZZZZZZ"} {
			is := is.New(t)
			_, err := turnframe.ParseTurnID(s)
			is.True(errors.Is(err, turnframe.ErrInvalid)) // bad id text
			var ie *turnframe.InvalidError
			is.True(errors.As(err, &ie))
			is.Equal(ie.Field, "turn id")
		}
	})
	t.Run("ZeroIsZero", func(t *testing.T) {
		is := is.New(t)
		var zero turnframe.TurnID
		is.True(zero.IsZero())
		is.True(!id.IsZero())
	})
}

func TestIDGeneratorMovesToTheNextMillisecondWhenOneIsSpent(t *testing.T) {
	is := is.New(t)
	gen := turnframe.NewIDGeneratorFrom(bytes.NewReader(bytes.Repeat([]byte{0xff}, 64)))
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	first := gen.AttemptID(now) // entropy all ones: the millisecond has no id left
	second := gen.AttemptID(now)
	is.Equal(first.Compare(second), -1)
	is.Equal(second.Time(), now.Add(time.Millisecond)) // moved on, not wrapped around
}
