package main

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/turnframe/turnframe"
)

// uiOverview is the overview page: what needs a person first, then counts.
type uiOverview struct {
	Status       statusJSON
	Outbox       []uiCount // rows per status, in status order
	Turns        []uiCount // turns per phase
	Statuses     []string  // the columns of Destinations
	Destinations []uiDestination
	MoreDests    bool         // more destinations than uiMaxDestinations
	Failed       []outboxJSON // the first failed rows, to requeue
}

// uiCount is one count with its name.
type uiCount struct {
	Name string
	N    int
}

// uiDestination is one destination's rows per status.
type uiDestination struct {
	Name   string
	Counts []int // in the order of uiOverview.Statuses
	Total  int
}

// uiMaxDestinations bounds the destinations the overview counts rows of.
const uiMaxDestinations = 50

// overview reads what 'turnframe status' reads, the rows per destination,
// and the first failed rows.
func (s *uiServer) overview(r *http.Request) (string, any, error) {
	ctx := r.Context()
	st, err := readStatus(ctx, s.store, s.e.now().UTC())
	if err != nil {
		return "", nil, err
	}
	o := uiOverview{Status: st}
	for _, status := range outboxStatuses() {
		o.Outbox = append(o.Outbox, uiCount{status.String(), st.Outbox[status.String()]})
		o.Statuses = append(o.Statuses, status.String())
	}
	for p := turnframe.PhaseReceived; p <= turnframe.PhaseAbandoned; p++ {
		o.Turns = append(o.Turns, uiCount{p.String(), st.Turns[p.String()]})
	}
	if o.Destinations, o.MoreDests, err = s.destinationCounts(ctx); err != nil {
		return "", nil, err
	}
	if o.Failed, err = uncertainRows(ctx, s.store, turnframe.OutboxFailed); err != nil {
		return "", nil, err
	}
	return "overview.html", o, nil
}

// destinationCounts counts the outbox rows of the first uiMaxDestinations
// destinations, by name, per status, with the operator read (the store has no
// counting call); more is true when further destinations exist.
func (s *uiServer) destinationCounts(ctx context.Context) (dests []uiDestination, more bool, err error) {
	counts, err := s.store.destinationCounts(ctx, uiMaxDestinations+1)
	if err != nil {
		return nil, false, err
	}
	column := map[string]int{}
	for i, st := range outboxStatuses() {
		column[st.String()] = i
	}
	for _, c := range counts {
		if len(dests) == 0 || dests[len(dests)-1].Name != c.destination {
			dests = append(dests, uiDestination{Name: c.destination, Counts: make([]int, len(column))})
		}
		d := &dests[len(dests)-1]
		d.Counts[column[c.status]] += c.rows
		d.Total += c.rows
	}
	if len(dests) > uiMaxDestinations {
		return dests[:uiMaxDestinations], true, nil
	}
	return dests, false, nil
}

// uiList is a page of a listing and the cursor of the next page ("" at
// the end).
type uiList[T any] struct {
	Filter string // the status listed, if any
	Items  []T
	Next   string
	// Link is the href of the next page of a history: the page's own
	// query (an entry's account and key) with after set to Next; "" at
	// the end.
	Link string
}

// outboxPage lists outbox rows a page at a time, oldest first: ?status=S
// keeps one status, ?after=ID goes on after a row (after its place, once
// it is pruned: listOutbox).
func (s *uiServer) outboxPage(r *http.Request) (string, any, error) {
	q := r.URL.Query()
	var filter turnframe.OutboxFilter
	if v := q.Get("status"); v != "" {
		st, err := turnframe.ParseOutboxStatus(v)
		if err != nil {
			return "", nil, usagef("%q is not an outbox status", v)
		}
		filter.Status = st
	}
	after := q.Get("after")
	if after != "" {
		if _, err := turnframe.ParseOutboxID(after); err != nil {
			return "", nil, usagef("%q is not an outbox row id", after)
		}
	}
	list := uiList[outboxJSON]{Filter: q.Get("status")}
	next, err := pageThrough(r.Context(), s.e, s.e.pageSize(), after,
		func(ctx context.Context, after string, n int) ([]turnframe.OutboxRecord, error) {
			f := filter
			f.Limit = n
			f.After, _ = turnframe.ParseOutboxID(after) // checked above, or a row's own id
			return listOutbox(ctx, s.store, f)
		},
		func(r turnframe.OutboxRecord) string { return r.ID.String() },
		func(page []turnframe.OutboxRecord) error {
			for _, rec := range page {
				list.Items = append(list.Items, outboxView(rec))
			}
			return nil
		})
	list.Next = next
	return "outbox.html", list, err
}

// turnsPage lists the unfinished turns a page at a time, each with what
// Recovery.Decide says it needs; ?after=ID goes on after a turn.
func (s *uiServer) turnsPage(r *http.Request) (string, any, error) {
	after := r.URL.Query().Get("after")
	if after != "" {
		if _, err := turnframe.ParseTurnID(after); err != nil {
			return "", nil, usagef("%q is not a turn id", after)
		}
	}
	var list uiList[turnJSON]
	next, err := pageThrough(r.Context(), s.e, s.e.pageSize(), after,
		func(ctx context.Context, after string, n int) ([]turnJSON, error) {
			return unfinishedTurns(ctx, s.store, "", after, n)
		},
		func(t turnJSON) string { return t.ID },
		func(page []turnJSON) error { list.Items = append(list.Items, page...); return nil })
	list.Next = next
	return "turns.html", list, err
}

// uiSubject is the page of an outbox row, a turn or a journal entry: what
// it is now, and a page of its history.
type uiSubject struct {
	Row     *outboxJSON
	Turn    *turnDetailJSON
	Entry   *statusEntry
	History uiList[historyJSON]
}

// idPage shows the outbox row with this id, or else the turn, with a page
// of its history (?after=SEQ goes on after a record).
func (s *uiServer) idPage(r *http.Request) (string, any, error) {
	ctx := r.Context()
	id, err := turnframe.ParseOutboxID(r.PathValue("id"))
	if err != nil {
		return "", nil, usagef("%q is not an id (26 characters, like 01J9Z3…)", r.PathValue("id"))
	}
	var page uiSubject
	var subject turnframe.Subject
	rec, err := s.store.GetOutbox(ctx, id)
	switch {
	case err == nil:
		v := outboxView(rec)
		page.Row, subject = &v, turnframe.OutboxSubject(rec.Account, id)
	case errors.Is(err, turnframe.ErrNotFound):
		turn, _ := turnframe.ParseTurnID(id.String())
		t, err := readTurn(ctx, s.store, turn)
		if err != nil {
			return "", nil, err
		}
		v := t.json()
		// The page lists up to MaxLimit of the turn's rows, as before, with
		// no link to more yet.
		if _, err := turnRows(ctx, s.e, s.store, turn, turnframe.MaxLimit, turnframe.OutboxID{}, func(page []turnframe.OutboxRecord) error {
			for _, r := range page {
				v.Outbox = append(v.Outbox, outboxView(r))
			}
			return nil
		}); err != nil {
			return "", nil, err
		}
		page.Turn, subject = &v, turnframe.TurnSubject(t.turn.Account, turn)
	default:
		return "", nil, err
	}
	page.History, err = s.history(r, subject)
	return "subject.html", page, err
}

// entryPage shows the journal entry ?account=A admitted under ?key=K, with
// a page of its history.
func (s *uiServer) entryPage(r *http.Request) (string, any, error) {
	q := r.URL.Query()
	acct, key := turnframe.AccountID(q.Get("account")), turnframe.IdempotencyKey(q.Get("key"))
	if err := acct.Validate(); err != nil {
		return "", nil, usagef("account: %v", err)
	}
	if err := key.ValidateStored(); err != nil {
		return "", nil, usagef("key: %v", err)
	}
	e, err := s.store.ByKey(r.Context(), acct, key)
	if err != nil {
		return "", nil, unreadEntry(acct, key, err)
	}
	page := uiSubject{Entry: &statusEntry{Account: string(acct), Turn: e.Turn.String(), entryJSON: entryView(e)}}
	page.History, err = s.history(r, turnframe.JournalSubject(acct, key))
	return "subject.html", page, err
}

// history reads one page of subject's history, oldest first, after the
// record ?after=SEQ; its link to the next page keeps the rest of the page's
// query (an entry's ?account and ?key).
func (s *uiServer) history(r *http.Request, subject turnframe.Subject) (uiList[historyJSON], error) {
	var list uiList[historyJSON]
	after := r.URL.Query().Get("after")
	if after != "" {
		if n, err := strconv.ParseInt(after, 10, 64); err != nil || n < 0 {
			return list, usagef("after %q is not a history record's number", after)
		}
	}
	next, err := pageThrough(r.Context(), s.e, s.e.pageSize(), after,
		func(ctx context.Context, after string, n int) ([]turnframe.HistoryRecord, error) {
			seq, _ := strconv.ParseInt(after, 10, 64) // checked above, or a record's own; "" is 0
			return s.store.History(ctx, subject, seq, n)
		},
		func(h turnframe.HistoryRecord) string { return strconv.FormatInt(h.Seq, 10) },
		func(page []turnframe.HistoryRecord) error {
			for _, h := range page {
				list.Items = append(list.Items, historyView(h))
			}
			return nil
		})
	list.Next = next
	if next != "" {
		q := r.URL.Query()
		q.Set("after", next)
		list.Link = "?" + q.Encode()
	}
	return list, err
}
