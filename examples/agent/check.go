package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/turnframe/turnframe"
)

// intended is one effect the story intends: at which remote, under which
// key the remote sees, for which command, and where turnframe left it.
type intended struct {
	remote, key string
	command     turnframe.IdempotencyKey
	status      string // the outbox row's, or the command's for mail
}

// intendedEffects lists the effects turnframe was asked for: one per
// outbox row, and the email send_email's handler sent itself.
func intendedEffects(ctx context.Context, p *process) ([]intended, error) {
	rows, err := p.store.ListOutbox(ctx, turnframe.OutboxFilter{Account: account, Limit: 100})
	if err != nil {
		return nil, err
	}
	var out []intended
	for _, row := range rows {
		out = append(out, intended{row.Destination, row.RemoteKey(), row.Key, row.Status.String()})
	}
	mail := commandKey(msgEmail.ID, script[askEmail][0])
	e, err := p.store.ByKey(ctx, account, mail)
	if err != nil {
		return nil, err
	}
	return append(out, intended{remoteMail, mailKey(account, mail), mail, e.Status.String()}), nil
}

// check prints every effect in each remote's ledger and returns an error
// naming each that did not happen exactly once, or was not intended, or
// that turnframe did not finish.
func (a *agent) check(ctx context.Context, p *process) error {
	want, err := intendedEffects(ctx, p)
	if err != nil {
		return err
	}
	a.say("\n== every effect, as each remote's ledger has it")
	problems := judge(a.w, want, a.remotes)
	for _, name := range []string{remoteAirline, remotePayments, remoteMail} {
		if _, keys := a.remotes.ledger(name); len(keys) != 1 {
			problems = append(problems, fmt.Sprintf("%s acted under %d keys: the user asked for one effect there", name, len(keys)))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("not exactly once: %s", strings.Join(problems, "; "))
	}
	a.say("every effect happened exactly once")
	return nil
}

// judge writes the table of every effect in r's ledgers to w, and returns
// what is not exactly once: an effect done twice or never, one nobody
// intended, one turnframe did not finish.
func judge(w io.Writer, want []intended, r *remotes) []string {
	var problems []string
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "REMOTE\tIDEMPOTENCY-KEY\tCOMMAND\tREQUESTS\tEFFECTS\tREF\tTURNFRAME\tEXACTLY ONCE")
	for _, name := range []string{remoteAirline, remotePayments, remoteMail} {
		ledger, keys := r.ledger(name)
		for _, k := range keys {
			e, in := ledger[k], find(want, name, k)
			ok := e.Effects == 1 && in != nil && (in.status == "completed" || in.status == "committed")
			cmd, status := "?", "not intended"
			if in != nil {
				cmd, status = string(in.command), in.status
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", name, k, cmd, e.Requests, e.Effects, e.Ref, status, yes(ok))
			if !ok {
				problems = append(problems, fmt.Sprintf("%s %s: %d effects, %s", name, k, e.Effects, status))
			}
		}
	}
	tw.Flush()
	for _, in := range want {
		if ledger, _ := r.ledger(in.remote); ledger[in.key].Effects == 0 {
			problems = append(problems, fmt.Sprintf("%s %s (%s): never happened", in.remote, in.key, in.command))
		}
	}
	return problems
}

func find(want []intended, remote, key string) *intended {
	for i := range want {
		if want[i].remote == remote && want[i].key == key {
			return &want[i]
		}
	}
	return nil
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}
