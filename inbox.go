package turnframe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// MessageID is a channel's own id of an inbound message: the update id of
// a chat platform, the event id of a webhook. A channel that does not see a
// quick answer delivers the same message again under the same id;
// ReceiveMessage makes every delivery of it one turn. It is 1–255 bytes of
// UTF-8 without control characters, scoped to an account: two accounts may
// receive the same id.
//
// Ids are compared byte for byte: no case folding, no Unicode
// normalisation, no trimming. Within an account an id must name one
// message for good (ids are kept as long as their turns): a platform whose
// message ids are unique only within a chat needs the chat's id in the
// MessageID, or two chats' messages meet as ErrConflict. An id may begin
// or end with a space, hold '~', or run to 255 bytes, which an
// IdempotencyKey may not: an app that derives its command keys from it
// encodes it first.
type MessageID string

// MaxMessageIDLen is the longest MessageID, in bytes.
const MaxMessageIDLen = 255

// Validate returns ErrInvalid unless id is 1–255 bytes of UTF-8 holding no
// control character.
func (id MessageID) Validate() error {
	if err := checkString("message_id", string(id), 1, MaxMessageIDLen); err != nil {
		return err
	}
	if i := strings.IndexFunc(string(id), unicode.IsControl); i >= 0 {
		return invalid("message_id", "%q holds a control character at byte %d", string(id), i)
	}
	return nil
}

// Inbound is one message as a channel delivered it.
type Inbound struct {
	Account AccountID
	// Conversation must be the same on every delivery of a message: keep
	// the ConversationID an app gives a chat, rather than a new one per
	// delivery, or a redelivery is ErrConflict (storekit.CheckRedelivery).
	Conversation ConversationID
	// MessageID is the channel's id of the message. "" receives it without
	// one, as Receive does: every delivery is then a new turn.
	MessageID MessageID
	Text      string // the user's message; may be empty (a voice turn)
}

// Received is what ReceiveMessage made of an inbound message.
type Received struct {
	// Turn is the turn the message began: a new one, or, for a redelivery,
	// the one its first delivery began.
	Turn TurnID
	// Redelivered reports that the message id had been received before:
	// nothing was written, and Turn is the earlier turn. That turn may be
	// finished, or still running in the process the first delivery reached
	// (or left to recovery by a crash): the app must not run it again.
	Redelivered bool
	// Phase is the turn's phase: PhaseReceived for a new turn.
	Phase TurnPhase
	// Response is, for a redelivered turn already delivered, the answer it
	// delivered, so the app can send it again; "" otherwise.
	Response string
}

// ReceiveMessage stores an inbound message as a new turn of its
// conversation, in PhaseReceived, unless the account already received its
// MessageID: then it writes nothing and returns the turn that message began
// (Received.Redelivered), with that turn's delivered answer when it has
// one. Concurrent deliveries of one message id begin exactly one turn; the
// others are redeliveries. Message ids are kept as long as their turns,
// which no pruning deletes.
//
// Errors: ErrInvalid for a bad account, a zero conversation, a bad message
// id, or a text over Limits.Text (WithLimits) or not UTF-8; ErrConflict for a message id
// the account received with another conversation or text (a channel's id
// names one message; an edited message needs an id of its own). Nothing is
// written on any error.
//
// A text over Limits.Text but within MaxTextLen, under a message id, is
// first judged by the store as a delivery: the same message received
// before, when the limit was higher, is the redelivery it is (the channel
// gets its turn and answer rather than an error it would retry for ever),
// and another message under that id is ErrConflict; only a message the
// account never received is refused ErrInvalid. The store refuses it in
// the transaction that would have begun its turn (a Write.App that returns
// the error), so it writes nothing and leaves the id unreceived.
//
// A crash before ReceiveMessage returns, or an error other than the ones
// above and ErrBusy (a COMMIT whose answer was lost and whose fate the
// store could not learn), leaves either no turn or a received turn the
// caller does not know the id of; the channel's redelivery then finds that
// turn (Redelivered, PhaseReceived), and recovery finds it as a turn to
// interpret again: the app that got the error must leave it to recovery
// too.
func (rt *Runtime) ReceiveMessage(ctx context.Context, in Inbound) (Received, error) {
	over, err := in.validate(rt.cfg.limits)
	if err != nil {
		return Received{}, err
	}
	if over != nil && in.MessageID == "" {
		return Received{}, over
	}
	now := rt.cfg.now()
	id := rt.cfg.ids.TurnID(now)
	w := Write{
		Account: in.Account,
		Turn:    id,
		Begin: &StoredTurn{
			Account: in.Account, ID: id, Conversation: in.Conversation, Text: in.Text, MessageID: in.MessageID,
			Phase: PhaseReceived, ReceivedAt: now, UpdatedAt: now,
		},
		Now: now,
	}
	refused := false
	if over != nil {
		w.App = func(context.Context, Tx) error { refused = true; return over }
	}
	applied, err := rt.store.Apply(ctx, w)
	if refused && errors.Is(err, ErrAppWrite) {
		return Received{}, over
	}
	if err != nil {
		return Received{}, fmt.Errorf("receive: %w", err)
	}
	if applied.Redelivered == nil {
		return Received{Turn: id, Phase: PhaseReceived}, nil
	}
	return rt.redelivered(ctx, *applied.Redelivered)
}

// redelivered reports the turn an earlier delivery began, with its answer
// if it delivered one.
func (rt *Runtime) redelivered(ctx context.Context, t StoredTurn) (Received, error) {
	r := Received{Turn: t.ID, Redelivered: true, Phase: t.Phase}
	if t.Phase != PhaseDelivered {
		return r, nil
	}
	rec, err := rt.replayOf(ctx, t.Account, t.ID)
	if err != nil {
		return Received{}, fmt.Errorf("receive: the answer of turn %v: %w", t.ID, err)
	}
	r.Response = rec.Response
	return r, nil
}

// validate returns err for an input that is invalid whatever the store
// holds, and over, the ErrInvalid of a text valid but over l.Text, which a
// redelivery of a message received under a higher limit may carry.
func (in Inbound) validate(l Limits) (over, err error) {
	if err := in.Account.Validate(); err != nil {
		return nil, err
	}
	if err := CheckID("conversation", in.Conversation); err != nil {
		return nil, err
	}
	if in.MessageID != "" {
		if err := in.MessageID.Validate(); err != nil {
			return nil, err
		}
	}
	over = l.checkText("text", in.Text)
	if over != nil && checkString("text", in.Text, 0, MaxTextLen) != nil {
		return nil, over // no store holds it: no redelivery either
	}
	return over, nil
}
