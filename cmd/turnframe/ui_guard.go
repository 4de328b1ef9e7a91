package main

import (
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
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
// origin — and, on loopback, refuses a request addressed to any other host
// name: a page of another site whose name was rebound to 127.0.0.1 would
// otherwise be same-origin with this one.
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

// write serves a POST: it checks the request's origin and token (checkWrite)
// before fn sees the form, then fn makes the move and returns the status
// line to show, or an error the page explains.
func (s *uiServer) write(fn func(*http.Request) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, uiMaxForm)
		if err := s.checkWrite(r); err != nil {
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
