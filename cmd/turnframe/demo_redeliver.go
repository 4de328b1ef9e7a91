package main

import (
	"context"
	"fmt"
	"time"
)

// redeliver plays the chat platform delivering e's message again: it saw
// no answer before process-1 died, as a platform that waits for a quick
// 2xx does after a restart. ReceiveMessage finds the turn the first
// delivery began, writes nothing, and hands back the answer recovery gave
// it, which is sent again; nothing of the turn runs a second time.
func (d *demo) redeliver(ctx context.Context, p *process, e *effect) error {
	d.clock.Advance(time.Second)
	in := e.inbound(e.conv)
	r, err := p.rt.ReceiveMessage(ctx, in)
	if err != nil {
		return fmt.Errorf("turn %d: redelivery: %w", e.n, err)
	}
	if !r.Redelivered || r.Turn != e.turn {
		return fmt.Errorf("turn %d: a redelivery of message %q began turn %v instead of finding turn %v", e.n, in.MessageID, r.Turn, e.turn)
	}
	d.say("turn %d  the chat platform saw no answer to message %q and delivers it again: ReceiveMessage finds turn %d (%v) and writes nothing; no second %s is ordered",
		e.n, in.MessageID, e.n, r.Phase, e.item)
	if r.Response != "" {
		d.say("turn %d  assistant, again, from the first turn: %q", e.n, r.Response)
	}
	return nil
}
