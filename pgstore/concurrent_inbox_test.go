package pgstore_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// One message id delivered at once to several processes (a store each, on
// pools of their own), for two accounts, some deliveries carrying another
// text under the id: each account begins exactly one turn, every delivery
// of that turn's message is its redelivery, and every other text is
// ErrConflict. The INSERT's unique index is the arbiter across processes,
// as one writer's order is in SQLite.
func TestOneMessageIDDeliveredToManyProcessesAtOnceBeginsOneTurnPerAccount(t *testing.T) {
	const n, rounds = 12, 5
	is := is.New(t)
	stores := openMany(t, 3)
	ids := turnframe.NewIDGenerator()
	accounts := []turnframe.AccountID{"acme", "globex"}
	conv := ids.ConversationID(base)
	for round := range rounds {
		msg := turnframe.MessageID(fmt.Sprintf("upd-%d", round))
		writes := make([]turnframe.Write, n)
		for i := range writes {
			account, turn := accounts[i%2], ids.TurnID(base)
			text := "hello"
			if i%3 == 2 {
				text = "hello, edited"
			}
			writes[i] = turnframe.Write{Account: account, Turn: turn, Now: base,
				Begin: &turnframe.StoredTurn{Account: account, ID: turn, Conversation: conv, Text: text, MessageID: msg}}
		}
		applied, errs := applyAll(stores, writes)
		began := map[turnframe.AccountID]int{}
		for i, err := range errs {
			if err == nil && applied[i].Redelivered == nil {
				_, dup := began[writes[i].Account]
				is.True(!dup) // one turn per account
				began[writes[i].Account] = i
			}
		}
		is.Equal(len(began), 2) // each account began one
		for i, err := range errs {
			w, winner := writes[i], writes[began[writes[i].Account]]
			switch {
			case i == began[w.Account]:
			case w.Begin.Text != winner.Begin.Text:
				is.True(errors.Is(err, turnframe.ErrConflict)) // another message under the id
			default:
				is.NoErr(err)                                    // the same message again
				is.True(applied[i].Redelivered != nil)           // a redelivery
				is.Equal(applied[i].Redelivered.ID, winner.Turn) // of its account's turn
				is.Equal(applied[i].Redelivered.Account, w.Account)
			}
		}
	}
}
