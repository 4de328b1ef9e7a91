package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/turnframe/turnframe"
)

// chat is the platform's id of the user's chat with the agent: every
// message of the story comes from it.
const chat = "ana-phone"

// chatsSchema is the app's table of the conversation it gave each chat.
// ReceiveMessage judges a resent message by its conversation as well as
// its text, so the conversation of a chat must outlive the process that
// gave it: a new one after a restart would make the client's resend of a
// message the first process received a conflict, never answered.
const chatsSchema = `CREATE TABLE chats (
	chat         TEXT PRIMARY KEY,
	conversation TEXT NOT NULL
) STRICT`

// conversation returns the conversation of chat, as the app's table keeps
// it; the chat's first message gives it one. Two processes asking at once
// run one after the other (the store's BEGIN IMMEDIATE), so a chat gets
// one conversation.
func conversation(ctx context.Context, p *process, chat string) (turnframe.ConversationID, error) {
	tx, err := p.store.BeginTx(ctx)
	if err != nil {
		return turnframe.ConversationID{}, err
	}
	defer tx.Rollback()
	var kept string
	err = tx.QueryRowContext(ctx, `SELECT conversation FROM chats WHERE chat = ?`, chat).Scan(&kept)
	if err == nil {
		return turnframe.ParseConversationID(kept)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return turnframe.ConversationID{}, fmt.Errorf("the conversation of chat %q: %w", chat, err)
	}
	conv := p.rt.NewConversationID()
	if _, err := tx.ExecContext(ctx, `INSERT INTO chats (chat, conversation) VALUES (?, ?)`, chat, conv.String()); err != nil {
		return turnframe.ConversationID{}, fmt.Errorf("keep the conversation of chat %q: %w", chat, err)
	}
	return conv, tx.Commit()
}

// receive stores msg of the user's chat (Runtime.ReceiveMessage) under the
// chat's conversation.
func (a *agent) receive(ctx context.Context, p *process, msg message) (turnframe.Received, error) {
	conv, err := conversation(ctx, p, chat)
	if err != nil {
		return turnframe.Received{}, err
	}
	return p.rt.ReceiveMessage(ctx, turnframe.Inbound{Account: account, Conversation: conv,
		MessageID: turnframe.MessageID(msg.ID), Text: msg.Text})
}
