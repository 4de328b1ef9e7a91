package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// A process that dies takes its memory with it. The client's resend of
// [m2] reaches a new process, which must name the chat's conversation as
// the first delivery did, or ReceiveMessage refuses the resend
// (ErrConflict: one message id, one message) and the message is never
// answered again. The example kept the conversation in memory only: its
// story restarted in one OS process and reused it, and a real restart
// minted a new one. It keeps each chat's conversation in its own table.
func TestARestartedProcessNamesTheChatsConversationAgain(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	var out bytes.Buffer
	a := testAgent(t, &out)
	p1, err := a.start(ctx, "process-1", true)
	is.NoErr(err)
	is.NoErr(a.respond(ctx, p1, msgSearch, false))
	err = a.respond(ctx, p1, msgBook, true)
	is.True(err == errDied) // process-1 dies before answering [m2]
	is.NoErr(p1.close())

	b := a.restarted()
	p2, err := b.start(ctx, "process-2", false)
	is.NoErr(err)
	defer p2.close()
	_, err = p2.rec.Recover(ctx, turnframe.RecoveryScope{}, recoverer{b, p2})
	is.NoErr(err)
	is.NoErr(b.respond(ctx, p2, msgBook, false)) // the resend is a redelivery, not a conflict
	t.Log(out.String())
	is.Equal(strings.Count(out.String(), "assistant (again, from the first turn): TP123 is booked."), 1) // answered from the first turn
	is.Equal(strings.Count(out.String(), "model calls book_flight"), 1)                                  // nothing ran again

	// A new message of the chat joins the same conversation.
	first, err := p2.store.LoadTurn(ctx, account, turnOf(ctx, t, p2, msgSearch))
	is.NoErr(err)
	is.NoErr(b.respond(ctx, p2, msgEmail, false))
	later, err := p2.store.LoadTurn(ctx, account, turnOf(ctx, t, p2, msgEmail))
	is.NoErr(err)
	is.Equal(later.Conversation, first.Conversation) // one chat, one conversation, across processes
}

// turnOf returns the turn msg began in p's file.
func turnOf(ctx context.Context, t *testing.T, p *process, msg message) turnframe.TurnID {
	t.Helper()
	e, err := p.store.ByKey(ctx, account, commandKey(msg.ID, script[msg.Text][0]))
	if err != nil {
		t.Fatalf("the command of %s: %v", msg.ID, err)
	}
	return e.Turn
}
