package harness

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/turnframe/turnframe"
)

// messageFigures are what the audit of the platform's log measured
// (issue 15): every message the log names against the turns in the database.
type messageFigures struct {
	messages                      int // distinct messages the log names (D lines)
	redelivered, redeliveryBegan  int // redeliveries answered with the first delivery's turn; that began the turn
	redeliveredWhen               map[string]int
	redeliveredAfterKill          int // by a work child started after a kill (at its start-up), or by a drain
	redeliveredTwice              int // messages redelivered by two children or more
	firstFoundRedelivered         int // first deliveries that found the turn a redelivery had begun (a race)
	minTurnsPerID, maxTurnsPerID  int // turns holding one logged message's id, over all messages
	messagesNotOneTurn            int // messages with no turn, or more than one
	messageMismatch               int // messages whose turn holds another text or conversation
	turnsWithoutID, turnsUnlogged int // turns received without a message id; with one the log does not name
	ignoredLines                  int // log lines cut short by a kill
}

// turnsPerID says how many turns each message id has: "1" when every one
// has exactly one, the range otherwise.
func (m messageFigures) turnsPerID() string {
	if m.minTurnsPerID == m.maxTurnsPerID {
		return strconv.Itoa(m.minTurnsPerID)
	}
	return fmt.Sprintf("%d–%d", m.minTurnsPerID, m.maxTurnsPerID)
}

func (m messageFigures) String() string {
	return fmt.Sprintf(`  messages (platform):            %d; turns per message id: %s (messages without exactly one turn: %d, with another text or conversation: %d)
                                  turns without a message id: %d, with one the platform never delivered: %d; log lines cut short: %d
  redeliveries:                   %d answered with the first delivery's turn, %d began the turn (its first delivery never landed)
                                  at once %d, a few turns later %d, at a work child's start-up %d, by the drain %d; after a kill %d
                                  first deliveries that found the turn a redelivery began: %d; messages redelivered by two children: %d`,
		m.messages, m.turnsPerID(), m.messagesNotOneTurn, m.messageMismatch,
		m.turnsWithoutID, m.turnsUnlogged, m.ignoredLines,
		m.redelivered, m.redeliveryBegan,
		m.redeliveredWhen[whenNow], m.redeliveredWhen[whenLater], m.redeliveredWhen[whenStartup], m.redeliveredWhen[whenDrain],
		m.redeliveredAfterKill, m.firstFoundRedelivered, m.redeliveredTwice)
}

// loggedTurn is a turn received with a message id, as the database holds it.
type loggedTurn struct {
	text, conversation string
}

// auditMessages holds the platform's log to the turns of the file: every
// message it names began exactly one turn, with its text, and every turn
// was begun by a message it names. afterKills is the first incarnation
// started after a kill.
func auditMessages(t *testing.T, b Backend, store turnframe.Store, path string, afterKills int) messageFigures {
	t.Helper()
	l, err := readPlatform(path)
	if err != nil {
		t.Fatal(err)
	}
	turns := messageTurns(t, b, store)
	m := messageFigures{messages: len(l.messages), ignoredLines: l.ignored, redeliveredWhen: map[string]int{}}
	if err := b.Query(context.Background(), store, "SELECT COUNT(*) FROM turns WHERE message_id IS NULL",
		func(scan func(...any) error) error { return scan(&m.turnsWithoutID) }); err != nil {
		t.Fatal(err)
	}
	logged := map[string]bool{}
	for i, msg := range l.messages {
		logged[msg.key()] = true
		got := turns[msg.key()]
		if i == 0 || len(got) < m.minTurnsPerID {
			m.minTurnsPerID = len(got)
		}
		m.maxTurnsPerID = max(m.maxTurnsPerID, len(got))
		switch {
		case len(got) != 1:
			m.messagesNotOneTurn++
			t.Logf("message %s %s (first delivered by %s): %d turns", msg.account, msg.id, msg.worker, len(got))
		case got[0] != loggedTurn{text: msg.text, conversation: msg.conversation.String()}:
			m.messageMismatch++
			t.Logf("message %s %s: its turn holds %+v", msg.account, msg.id, got[0])
		}
	}
	for k := range turns {
		if !logged[k] {
			m.turnsUnlogged++
			t.Logf("turn of message %q: not in the platform's log", k)
		}
	}
	by := map[string]map[string]bool{} // message key: the workers that redelivered it
	for _, r := range l.redeliveries {
		if r.outcome == outcomeBegan {
			m.redeliveryBegan++
		} else {
			m.redelivered++
		}
		m.redeliveredWhen[r.when]++
		if r.when == whenDrain || (r.when == whenStartup && incarnation(r.worker) >= afterKills) {
			m.redeliveredAfterKill++
		}
		if by[r.key] == nil {
			by[r.key] = map[string]bool{}
		}
		by[r.key][r.worker] = true
	}
	for _, workers := range by {
		if len(workers) > 1 {
			m.redeliveredTwice++
		}
	}
	return m
}

// messageTurns returns the turns received with a message id, by message
// key (account and id).
func messageTurns(t *testing.T, b Backend, store turnframe.Store) map[string][]loggedTurn {
	t.Helper()
	turns := map[string][]loggedTurn{}
	err := b.Query(context.Background(), store, "SELECT account, message_id, text, conversation FROM turns WHERE message_id IS NOT NULL",
		func(scan func(...any) error) error {
			var account, id string
			var lt loggedTurn
			if err := scan(&account, &id, &lt.text, &lt.conversation); err != nil {
				return err
			}
			k := account + "\x00" + id
			turns[k] = append(turns[k], lt)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return turns
}

// incarnation reads the incarnation number of a worker name (workerName);
// -1 when it has none.
func incarnation(worker string) int {
	i := strings.LastIndexByte(worker, '-')
	n, err := strconv.Atoi(worker[i+1:])
	if i < 0 || err != nil {
		return -1
	}
	return n
}
