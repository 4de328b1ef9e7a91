package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/turnframe/turnframe"
	"github.com/turnframe/turnframe/sqlitestore"
)

// How the example's parts are tuned. The command timeout bounds the
// send_email handler's wait for the mail remote that hangs.
const (
	commandTimeout = time.Second
	sendTimeout    = 2 * time.Second
	mailSettle     = 30 * time.Second // the first lookup of an unknown email waits this long
	airlineMemory  = 24 * time.Hour   // how long the airline remembers a key
)

// process is one run of the application over the SQLite file: its store,
// runtime and recovery, and a Dispatcher.Run on a goroutine of its own
// that ends with the process.
type process struct {
	name  string
	store *sqlitestore.Store
	rt    *turnframe.Runtime
	rec   *turnframe.Recovery
	stop  context.CancelFunc
	ran   chan error // Dispatcher.Run's return; nil once read
	err   error      // what Run returned
}

// appSchema is the app's table of search results, in turnframe's file
// (chatsSchema is its other). A row is keyed by the account and the
// command's key, as turnframe's journal is: keys are unique per account,
// and two tenants may both admit "m1/c1".
const appSchema = `CREATE TABLE searches (
	account     TEXT NOT NULL,
	command_key TEXT NOT NULL,
	flights     TEXT NOT NULL,
	PRIMARY KEY (account, command_key)
) STRICT`

// start opens the file (creating it and the app's table if create) and
// starts the dispatcher.
func (a *agent) start(ctx context.Context, name string, create bool) (*process, error) {
	var opts []sqlitestore.Option
	if !create {
		opts = append(opts, sqlitestore.WithExisting()) // a restarted process finds its file
	}
	store, err := sqlitestore.Open(ctx, a.path, opts...)
	if err != nil {
		return nil, err
	}
	if create {
		if err := createAppSchema(ctx, store); err != nil {
			store.Close()
			return nil, err
		}
	}
	common := slices.Concat(a.options(), []turnframe.Option{turnframe.WithClock(a.clock.Now)})
	p := &process{
		name:  name,
		store: store,
		rt:    turnframe.New(store, slices.Concat(common, []turnframe.Option{turnframe.WithCommandTimeout(commandTimeout)})...),
		rec:   turnframe.NewRecovery(store, common...),
		ran:   make(chan error, 1),
	}
	disp := turnframe.NewDispatcher(store, a.sender, turnframe.DispatchConfig{
		WorkerID: name, SendTimeout: sendTimeout, GracePeriod: sendTimeout}, common...)
	rctx, stop := context.WithCancel(ctx)
	p.stop = stop
	go func() { p.ran <- disp.Run(rctx) }()
	return p, nil
}

// options are what every part is made with: what each remote can do about
// an unknown outcome, a logger for errors only, and the late-answer count.
func (a *agent) options() []turnframe.Option {
	return []turnframe.Option{
		turnframe.WithDestination(remoteAirline, turnframe.Remote{Deduplicates: airlineMemory}),
		turnframe.WithDestination(remotePayments, turnframe.Remote{
			Verifier: a.remotes.verifier(remotePayments, func(u turnframe.Uncertain) string { return u.RemoteKey })}),
		turnframe.WithCommand(toolEmail, turnframe.Remote{SettleDelay: mailSettle,
			Verifier: a.remotes.verifier(remoteMail, func(u turnframe.Uncertain) string { return mailKey(u.Subject.Account, u.Key) })}),
		turnframe.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))),
		turnframe.WithObserver(turnframe.ObserverFunc(func(s turnframe.Signal, _ turnframe.Labels, _ time.Duration) {
			if s == turnframe.SignalLateAnswer {
				select {
				case a.late <- struct{}{}:
				default: // one is enough to wake the waiter
				}
			}
		})),
	}
}

func createAppSchema(ctx context.Context, store *sqlitestore.Store) error {
	tx, err := store.BeginTx(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, table := range []string{appSchema, chatsSchema} {
		if _, err := tx.ExecContext(ctx, table); err != nil {
			return fmt.Errorf("create the app's tables: %w", err)
		}
	}
	return tx.Commit()
}

// stopDispatch ends the dispatcher: its sends in flight are settled before
// it returns.
func (p *process) stopDispatch() error {
	p.stop()
	if p.ran != nil {
		p.err, p.ran = <-p.ran, nil
	}
	return p.err
}

// close stops the dispatcher and closes the store.
func (p *process) close() error {
	err := p.stopDispatch()
	if cerr := p.store.Close(); err == nil {
		err = cerr
	}
	return err
}
