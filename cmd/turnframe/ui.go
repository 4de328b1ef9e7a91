package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/turnframe/turnframe"
)

func uiCommand() *command {
	return &command{
		name:    "ui",
		summary: "serve an operator web page for a live database: what needs a person, with buttons",
		help: `Serves a web page on the database: counts by status and destination; the
outbox rows and journal entries that need intervention or whose outcome is
unknown, first, each with settle (a verdict and a note) and escalate buttons;
failed rows with requeue; commands awaiting approval with approve and deny;
the unfinished turns with recovery's decision; and the history of a row, an
entry or a turn. The page reloads itself every --refresh while no form field
is being filled in. Its buttons make the moves the commands make — settle,
requeue, approve, deny — through the same library calls, recorded in the
history under --actor.

It listens on --addr, the loopback interface by default, prints its URL and
serves until interrupted (Ctrl-C), then shuts down. A non-loopback --addr is
refused unless --allow-remote is given: the page has no login, so anyone who
reaches the address acts as the operator. Every write is a POST that must
carry this run's random token, which only the page's own forms hold, and come
from the page's own origin (Origin or Referer, and Sec-Fetch-Site when the
browser sends it). Against DNS rebinding (a hostile site whose name is made to
resolve to the page's address), every request must be addressed to the host
the page serves on: on loopback a loopback host name; elsewhere the host of
--addr — its IP, or the host name it gives and the IP that name was bound to
(browse to one of them) — or, for an --addr of every interface (":8080",
"0.0.0.0:8080"), an IP address or localhost; any other host name is refused
(421). --read-only serves no write at all and draws no button.

The settle and requeue forms carry the attempt the page showed: a row or
entry sent again since the page was drawn, or a row no longer failed, is
refused (409), so a re-posted form or a late double click never acts on an
outcome nobody looked at. Both checks are part of the write, so of two
operators acting on one row at once, one is refused. A bad id or form (400),
an id of nothing (404), a form the database moved past (409), a file that
stayed locked past --busy-timeout (503), or a PostgreSQL role the server
refuses the login or the privilege (403: restart the page as a role that
may; it is also printed on the command's output) is answered with a
message; nothing is changed. Before every page and every write the page reads
the database's schema version: once the application, upgraded, has migrated
it past this turnframe's (as the one-shot commands refuse such a database),
every request is refused (503) with what to do — restart the page with a
turnframe at least as new as the application's. It also looks at the file
at --db: once that is no longer the file the page opened (a backup restored
over it, the file removed), every request is refused (503), since the page
would read a file no application reads and write into a -wal file the next
database opened there takes up; restart the page on the application's file.`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env, []string) error {
			db := addDBFlags(fs)
			addr := fs.String("addr", "127.0.0.1:0", "the `host:port` to listen on (port 0: any free port)")
			remote := fs.Bool("allow-remote", false, "allow a non-loopback --addr (the page has no login)")
			readOnly := fs.Bool("read-only", false, "serve no write: no buttons, and every POST is refused")
			refresh := fs.Duration("refresh", 15*time.Second, "how often the page reloads itself (0: never; at least 1s, at most 596h, the longest a browser's timer holds)")
			actor := fs.String("actor", string(turnframe.ActorOperator), "who decides, as the audit trail records the page's writes (like operator:alice)")
			return func(ctx context.Context, e *env, args []string) error {
				if err := noArgs(args); err != nil {
					return err
				}
				who := turnframe.Actor(*actor)
				if err := who.Validate(); err != nil {
					return usagef("--actor: %v", err)
				}
				if !who.MayIntervene() {
					return usagef("--actor %q may not settle, requeue or approve by hand: name the person deciding (like %q)", *actor, "operator:alice")
				}
				if *refresh < 0 {
					return usagef("--refresh must not be negative")
				}
				loopback, err := loopbackAddr(*addr)
				if err != nil {
					return err
				}
				if !loopback && !*remote {
					return usagef("--addr %s is not a loopback address; the page has no login, so anyone who reaches it acts "+
						"as the operator: add --allow-remote to serve it there anyway (or --read-only as well)", *addr)
				}
				store, err := db.open(ctx, e)
				if err != nil {
					return err
				}
				defer store.Close()
				s, err := newUIServer(store, db, e, uiOptions{readOnly: *readOnly, loopback: loopback, hosts: remoteHosts(*addr),
					refresh: *refresh, actor: who})
				if err != nil {
					return err
				}
				return serveUI(ctx, e, s, *addr)
			}
		},
	}
}

// loopbackAddr reports whether addr (host:port) names a loopback interface:
// "localhost" or a loopback IP. An empty host, which listens on every
// interface, is not loopback. A port net.Listen would refuse (out of
// range, an unknown service name) is a usage error.
func loopbackAddr(addr string) (bool, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false, usagef("--addr %q is not host:port (like 127.0.0.1:8080)", addr)
	}
	// The check net.Listen makes of it, made before the file is opened:
	// a port out of range is the command line's mistake (exit 2), not a
	// failure to listen (exit 1).
	if _, err := net.LookupPort("tcp", port); err != nil {
		return false, usagef("--addr %q: %q is not a port (0 to 65535; 0: any free port)", addr, port)
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback(), nil
}

// serveUI listens on addr, prints the page's URL and serves s until ctx
// ends; then it shuts the server down, letting the requests in progress
// finish for a few seconds, and returns once nothing it started still runs.
func serveUI(ctx context.Context, e *env, s *uiServer, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	s.opts.hosts.bind(ln.Addr()) // before serving: the IP a host name of --addr was bound to
	mode := "buttons write with actor " + string(s.opts.actor)
	if s.opts.readOnly {
		mode = "read-only"
	}
	fmt.Fprintf(e.stdout, "turnframe ui: serving %s on http://%s/ (%s); Ctrl-C stops it\n", s.store.Name(), ln.Addr(), mode)
	srv := &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(stop)
	if err != nil {
		srv.Close() // the requests still running past the grace period are cut off
	}
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	fmt.Fprintf(e.stdout, "turnframe ui: stopped\n")
	return nil
}
