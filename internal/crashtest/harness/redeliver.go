package harness

import (
	"errors"
	"fmt"

	"github.com/turnframe/turnframe"
)

// How often, in percent of the turns a work child delivers, the platform
// redelivers the message at once before the turn runs, at once after it
// ran, or a few turns later (the rest are redelivered at some child's
// start-up, or by the drain); and the share of the messages not
// redelivered yet that a work child's start-up redelivers.
const (
	redeliverBeforePercent = 15
	redeliverAfterPercent  = 15
	redeliverLaterPercent  = 25
	redeliverLaterMaxTurns = 4
	startupSharePercent    = 40
)

// laterRedelivery is a message the platform redelivers once the child
// reached turn due.
type laterRedelivery struct {
	msg message
	due int
}

// deliver delivers a message for the first time: it appends its D line,
// then receives it. redelivered reports that a redelivery (another child's,
// from the log) began its turn first: that turn is the other child's to
// finish, or recovery's.
func (c *child) deliver(m message) (turn turnframe.TurnID, redelivered bool, err error) {
	if c.platform != nil {
		if err := c.platform.delivering(c.worker, m); err != nil {
			return turn, false, err
		}
		progress("delivering %s %s", m.account, m.id) // a kill may land here: the message logged, its turn not begun
	}
	rec, err := c.rt.ReceiveMessage(c.ctx, m.inbound())
	if err != nil {
		return turn, false, fmt.Errorf("receive %s: %w", m.id, err)
	}
	if rec.Redelivered {
		seen("first_redelivered", "%s %s: turn %v, %v", m.account, m.id, rec.Turn, rec.Phase)
		return rec.Turn, true, nil
	}
	progress("received %v", rec.Turn)
	return rec.Turn, false, nil
}

// redeliver delivers m again, as the platform does at when. If the
// delivery finds the turn the first one began, it checks that turn and
// does nothing else: the turn is running, finished, or recovery's, and the
// app must not run it again. If it begins the turn (the first delivery
// never landed: its child died between the D line and the commit), play
// runs it as a new turn when set; otherwise it is left to recovery. Then it
// appends the R line. ErrConflict is a failure: the platform redelivers the
// same text under the same id.
func (c *child) redeliver(m message, when string, play bool) error {
	rec, err := c.rt.ReceiveMessage(c.ctx, m.inbound())
	if errors.Is(err, turnframe.ErrConflict) {
		return fmt.Errorf("redelivery (%s) of %s %s was refused: %w", when, m.account, m.id, err)
	}
	if err != nil {
		return fmt.Errorf("redeliver %s %s: %w", m.account, m.id, err)
	}
	outcome := outcomeAnswered
	if rec.Redelivered {
		if err := c.checkRedelivered(m, rec); err != nil {
			return err
		}
		seen("redelivered", "%s %s %s: turn %v, %v", when, m.account, m.id, rec.Turn, rec.Phase)
	} else {
		outcome = outcomeBegan
		seen("redelivery_began", "%s %s %s: turn %v", when, m.account, m.id, rec.Turn)
		if play {
			if err := c.play(m.account, rec.Turn, m.text); err != nil {
				return err
			}
		}
	}
	if c.platform == nil {
		return nil
	}
	return c.platform.answered(c.worker, m, when, outcome)
}

// checkRedelivered checks the turn a redelivery was answered with: the
// one its first delivery began, holding its message, and carrying its
// answer once delivered.
func (c *child) checkRedelivered(m message, rec turnframe.Received) error {
	st, err := c.store.LoadTurn(c.ctx, m.account, rec.Turn)
	if err != nil {
		return fmt.Errorf("redelivery of %s %s: load turn %v: %w", m.account, m.id, rec.Turn, err)
	}
	switch {
	case st.MessageID != m.id || st.Text != m.text || st.Conversation != m.conversation:
		return fmt.Errorf("redelivery of %s %s answered with turn %v of message %q, text %q, conversation %v",
			m.account, m.id, rec.Turn, st.MessageID, st.Text, st.Conversation)
	case rec.Phase == turnframe.PhaseDelivered && rec.Response == "":
		return fmt.Errorf("redelivery of %s %s: turn %v delivered, but no answer came back", m.account, m.id, rec.Turn)
	}
	return nil
}

// redeliverLogged redelivers the messages of the log no child redelivered
// yet: a share of them, in percent (100: all), drawn per message.
func (c *child) redeliverLogged(when string, share int, play bool) error {
	if c.platform == nil {
		return nil
	}
	l, err := readPlatform(c.platform.path)
	if err != nil {
		return err
	}
	for _, m := range l.notRedelivered() {
		if share < 100 && draw(c.seed, "redeliver_startup", c.inc, m.key()) >= share {
			continue
		}
		if err := c.redeliver(m, when, play); err != nil {
			return err
		}
	}
	return nil
}

// redeliverDue redelivers the later redeliveries due by turn i, and
// returns those still to come.
func (c *child) redeliverDue(later []laterRedelivery, i int) ([]laterRedelivery, error) {
	var rest []laterRedelivery
	for _, l := range later {
		if l.due > i {
			rest = append(rest, l)
			continue
		}
		if err := c.redeliver(l.msg, whenLater, true); err != nil {
			return nil, err
		}
	}
	return rest, nil
}

// play plans a received turn from its text and finishes it. A turn another
// process planned meanwhile (its recovery) is left to that process.
func (c *child) play(account turnframe.AccountID, turn turnframe.TurnID, text string) error {
	_, err := c.rt.Plan(c.ctx, account, turn, planFor(c.seed, text))
	switch {
	case errors.Is(err, turnframe.ErrConflict):
		seen("deferred", "%v: another process planned it and moved on: %v", turn, err)
		return nil
	case err != nil:
		return fmt.Errorf("plan: %w", err)
	}
	progress("planned %v", turn)
	_, err = c.finish(c.ctx, account, turn)
	return err
}
