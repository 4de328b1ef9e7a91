package main

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// uiRefusal is a write the page refused before reading it: no token, a
// wrong one, or a request from another origin.
type uiRefusal struct{ reason string }

func (e *uiRefusal) Error() string { return e.reason }

// uiMaxForm bounds a write's form: a note is at most 1024 bytes.
const uiMaxForm = 64 << 10

// guard sets the headers every answer carries — no framing (no
// clickjacking), no inline script, no caching, the Referer kept to this
// origin — and refuses a request addressed to a host the page was not
// served under: on loopback any but a loopback host name, off it any but
// what --addr named (hostRule). A page of another site whose name was
// rebound to the page's address (DNS rebinding) would otherwise be
// same-origin with this one, and read its pages and token.
func (s *uiServer) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "+
			"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		if s.opts.loopback && !loopbackHost(r.Host) {
			http.Error(w, "this page answers only to a loopback host name (localhost, 127.0.0.1, [::1])", http.StatusMisdirectedRequest)
			return
		}
		if !s.opts.loopback && !s.opts.hosts.allows(r.Host) {
			http.Error(w, "this page answers only to the host it was served on (the host of --addr)", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names the loopback interface.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// hostRule is what a page served off loopback answers to: the host of
// --addr — an IP, or a host name and the IP it was bound to — or, when
// --addr names every interface, any IP literal and a loopback name. A host
// name of anyone else's is refused: DNS rebinding needs a name the
// attacker controls, never an IP literal nor localhost.
type hostRule struct {
	names []string // host names, compared without case
	ips   []net.IP
	anyIP bool
}

// remoteHosts returns the hostRule of addr (host:port, checked by
// loopbackAddr): its IP; or its host name, to which serveUI adds the IP
// the listener was bound to (bind); or, for no host or an unspecified IP
// (0.0.0.0, ::), any IP literal.
func remoteHosts(addr string) hostRule {
	host, _, _ := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	switch {
	case host == "", ip != nil && ip.IsUnspecified():
		return hostRule{anyIP: true}
	case ip != nil:
		return hostRule{ips: []net.IP{ip}}
	}
	return hostRule{names: []string{host}}
}

// bind adds the address the page's listener was bound to.
func (h *hostRule) bind(a net.Addr) {
	if tcp, ok := a.(*net.TCPAddr); ok && !h.anyIP {
		h.ips = append(h.ips, tcp.IP)
	}
}

// allows reports whether a request's Host header names a host of the rule
// (its port is not compared: the Origin check compares the whole Host).
func (h hostRule) allows(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
	}
	if ip := net.ParseIP(host); ip != nil {
		return h.anyIP || slices.ContainsFunc(h.ips, ip.Equal)
	}
	if h.anyIP && loopbackHost(host) {
		return true
	}
	return slices.ContainsFunc(h.names, func(n string) bool { return strings.EqualFold(n, host) })
}

// write serves a POST: it checks the request's origin and token (checkWrite)
// and the database's file and schema (checkDB) before fn sees the form, then fn
// makes the move and returns the status line to show, or an error the page
// explains.
func (s *uiServer) write(fn func(*http.Request) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, uiMaxForm)
		if err := s.checkWrite(r); err != nil {
			s.fail(w, r, err)
			return
		}
		if err := s.checkDB(r.Context()); err != nil {
			s.fail(w, r, err)
			return
		}
		msg, err := fn(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.render(w, http.StatusOK, "result.html", uiPage{Flash: &uiFlash{OK: true, Message: msg}, Data: uiResult{Back: backPath(r)}})
	}
}

// checkWrite refuses a write unless it comes from this page: the browser
// must say it is same-origin where it says so (Sec-Fetch-Site), its Origin —
// or, without one, its Referer — must be this server's, and the form must
// carry this run's token, which only the page's own forms hold.
func (s *uiServer) checkWrite(r *http.Request) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return &uiRefusal{"the request came from another site (Sec-Fetch-Site: " + site + ")"}
	}
	self := "http://" + r.Host
	origin := r.Header.Get("Origin")
	switch {
	case origin != "":
		if origin != self {
			return &uiRefusal{"the request came from another origin (" + origin + ")"}
		}
	case r.Referer() != "":
		ref, err := url.Parse(r.Referer())
		if err != nil || ref.Scheme+"://"+ref.Host != self {
			return &uiRefusal{"the request came from another page than this server's"}
		}
	default:
		return &uiRefusal{"the request says neither its Origin nor its Referer, so it cannot be told from a cross-site one"}
	}
	if err := r.ParseForm(); err != nil {
		return usagef("the form could not be read: %v", err)
	}
	token := r.PostFormValue("token")
	if token == "" {
		return &uiRefusal{"the form carries no token; use the page's own buttons"}
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(s.token)) != 1 {
		return &uiRefusal{"the form's token is not this run's (was the page drawn by an earlier 'turnframe ui'? reload it)"}
	}
	return nil
}

// schemaMovedError is the refusal of a request once the database's schema
// is no longer the one this build reads and writes: the application,
// upgraded, migrated it while the page was being served (or it was
// restored from an older backup). It is answered 503: this run of the page
// cannot serve it again, a newer turnframe can.
type schemaMovedError struct{ found, want int64 }

func (e *schemaMovedError) Error() string {
	if e.found > e.want {
		return fmt.Sprintf("the database's schema is now version %d, newer than this turnframe's %d (the upgraded application "+
			"migrated it): this page no longer reads or writes it. Stop it and start a turnframe at least as new as the "+
			"application's", e.found, e.want)
	}
	return fmt.Sprintf("the database's schema is now version %d, older than this turnframe's %d (was it restored from a "+
		"backup?): this page no longer reads or writes it. Stop it, and run 'turnframe migrate' or start the application",
		e.found, e.want)
}

// checkDB refuses to serve a request on a database file that is no longer
// the one the page opened (checkFile) or a schema that is no longer this
// build's (checkSchema).
func (s *uiServer) checkDB(ctx context.Context) error {
	if err := s.checkFile(); err != nil {
		return err
	}
	return s.checkSchema(ctx)
}

// checkSchema refuses to serve a request, with a *schemaMovedError, when
// the database's schema is no longer this build's, as every one-shot
// command refuses such a database when it opens it: an older writer would
// not keep what a newer schema adds. It is one small query before each page
// and each write; a migration that commits between it and the write it
// guards is not caught.
func (s *uiServer) checkSchema(ctx context.Context) error {
	found, want, err := s.store.schemaVersion(ctx)
	if err != nil {
		return err
	}
	if found != want {
		return &schemaMovedError{found: found, want: want}
	}
	return nil
}
