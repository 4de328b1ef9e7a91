package storekit

import (
	"fmt"

	"github.com/turnframe/turnframe"
)

// CheckRedelivery is the rule a store applies to a Write.Begin whose
// MessageID began the turn stored already: nil when begin is the same
// message again (same conversation, same text), so the store writes nothing
// and reports stored as Applied.Redelivered; ErrConflict otherwise.
func CheckRedelivery(stored, begin turnframe.StoredTurn) error {
	switch {
	case stored.Conversation != begin.Conversation:
		return fmt.Errorf("%w: message %q of %q began turn %v in conversation %v, not %v",
			turnframe.ErrConflict, begin.MessageID, begin.Account, stored.ID, stored.Conversation, begin.Conversation)
	case stored.Text != begin.Text:
		return fmt.Errorf("%w: message %q of %q began turn %v with another text",
			turnframe.ErrConflict, begin.MessageID, begin.Account, stored.ID)
	}
	return nil
}
