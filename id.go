package turnframe

import (
	"crypto/rand"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// idKind names the five identifier types; it is sealed so that ID cannot be
// instantiated outside this package.
type idKind interface {
	kindName() string
}

type (
	conversationKind struct{}
	turnKind         struct{}
	eventKind        struct{}
	outboxKind       struct{}
	attemptKind      struct{}
)

func (conversationKind) kindName() string { return "conversation id" }
func (turnKind) kindName() string         { return "turn id" }
func (eventKind) kindName() string        { return "event id" }
func (outboxKind) kindName() string       { return "outbox id" }
func (attemptKind) kindName() string      { return "attempt id" }

// ID is a ULID tagged with what it identifies, so that a TurnID cannot be
// passed where an OutboxID is expected. Its text form is the 26-character
// Crockford base32 ULID, which sorts like the id and is what the stores keep.
// The zero value is the zero ULID and reports IsZero; no generated id is zero.
//
// ID values are comparable and safe to copy and share between goroutines.
type ID[K idKind] struct {
	u ulid.ULID
}

// ConversationID identifies a conversation: the turns of one dialogue.
type ConversationID = ID[conversationKind]

// TurnID identifies one turn: one user message and everything it caused.
type TurnID = ID[turnKind]

// EventID identifies one domain event in the event journal.
type EventID = ID[eventKind]

// OutboxID identifies one outbox row.
type OutboxID = ID[outboxKind]

// AttemptID identifies one attempt to execute a command. A resumed command gets
// a new AttemptID under the same idempotency key.
type AttemptID = ID[attemptKind]

// String returns the 26-character text form of the id, or the 26 zeros of the
// zero ULID for the zero id.
func (id ID[K]) String() string { return id.u.String() }

// IsZero reports whether id is the zero value.
func (id ID[K]) IsZero() bool { return id.u == ulid.ULID{} }

// Compare returns -1, 0 or +1 as id sorts before, equal to or after other.
// Ids sort by the millisecond they were made in, then by their entropy.
func (id ID[K]) Compare(other ID[K]) int { return id.u.Compare(other.u) }

// Time returns the millisecond, in UTC, encoded in the id.
func (id ID[K]) Time() time.Time { return ulid.Time(id.u.Time()).UTC() }

// MarshalText implements encoding.TextMarshaler with the 26-character form.
func (id ID[K]) MarshalText() ([]byte, error) { return []byte(id.u.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler. Text that is not a
// 26-character ULID is ErrInvalid.
func (id *ID[K]) UnmarshalText(text []byte) error {
	parsed, err := parseID[K](string(text))
	if err != nil {
		return err
	}
	*id = parsed
	return nil
}

func parseID[K idKind](s string) (ID[K], error) {
	var kind K
	u, err := ulid.ParseStrict(s)
	if err != nil {
		return ID[K]{}, &InvalidError{Field: kind.kindName(), Reason: fmt.Sprintf("%q is not a ULID", s)}
	}
	return ID[K]{u: u}, nil
}

// ParseConversationID parses the text form of a ConversationID.
// Anything but a 26-character ULID is ErrInvalid.
func ParseConversationID(s string) (ConversationID, error) { return parseID[conversationKind](s) }

// ParseTurnID parses the text form of a TurnID. Anything but a 26-character
// ULID is ErrInvalid.
func ParseTurnID(s string) (TurnID, error) { return parseID[turnKind](s) }

// ParseEventID parses the text form of an EventID. Anything but a
// 26-character ULID is ErrInvalid.
func ParseEventID(s string) (EventID, error) { return parseID[eventKind](s) }

// ParseOutboxID parses the text form of an OutboxID. Anything but a
// 26-character ULID is ErrInvalid.
func ParseOutboxID(s string) (OutboxID, error) { return parseID[outboxKind](s) }

// ParseAttemptID parses the text form of an AttemptID. Anything but a
// 26-character ULID is ErrInvalid.
func ParseAttemptID(s string) (AttemptID, error) { return parseID[attemptKind](s) }

// IDGenerator makes ids that never go backwards: every id it returns sorts
// after every id it returned before, across goroutines, even when the clock
// steps back. Within one millisecond it counts up from a random start. A
// time before 1970 or past what a ULID holds is taken as the nearest time it
// holds, so no clock makes it fail. It is safe for concurrent use.
//
// ulid.Make is unique but not ordered under contention (it reads the clock
// before taking its lock); IDGenerator reads the time under its own lock and
// never goes below the last id it made.
//
// The zero value is not usable; call NewIDGenerator.
type IDGenerator struct {
	mu      sync.Mutex
	last    ulid.ULID
	entropy io.Reader
}

// NewIDGenerator returns a generator drawing entropy from crypto/rand.
func NewIDGenerator() *IDGenerator {
	return NewIDGeneratorFrom(rand.Reader)
}

// NewIDGeneratorFrom returns a generator drawing entropy from r, for tests
// that need reproducible ids. r is only read under the generator's lock, once
// per millisecond in which ids are made. It panics if r is nil.
func NewIDGeneratorFrom(r io.Reader) *IDGenerator {
	if r == nil {
		panic("turnframe: NewIDGeneratorFrom with a nil reader")
	}
	return &IDGenerator{entropy: r}
}

// idMillis is the millisecond an id made at now encodes: now's, clamped to
// what a ULID holds (the Unix epoch to the year 10889), so that a clock out
// of range never makes the generator fail. Times the stores take are
// checked by CheckTime long before that.
func idMillis(now time.Time) uint64 {
	switch {
	case now.Before(time.Unix(0, 0)):
		return 0
	case now.After(ulid.Time(ulid.MaxTime())):
		return ulid.MaxTime()
	}
	return ulid.Timestamp(now)
}

func (g *IDGenerator) next(now time.Time) ulid.ULID {
	g.mu.Lock()
	defer g.mu.Unlock()
	ms := idMillis(now)
	if g.last != (ulid.ULID{}) && ms <= g.last.Time() {
		u := g.last
		if increment(u[6:]) {
			g.last = u
			return u
		}
		ms = g.last.Time() + 1 // the millisecond's 80 bits are spent
	}
	var u ulid.ULID
	if err := u.SetTime(ms); err != nil {
		// Only the very last millisecond a ULID holds, with its 80 bits
		// spent, gets here: an id generator made 2^80 ids in it.
		panic(fmt.Sprintf("turnframe: id time: %v", err))
	}
	if _, err := io.ReadFull(g.entropy, u[6:]); err != nil {
		// crypto/rand does not fail; a test fixture's reader that does is a
		// programming error.
		panic(fmt.Sprintf("turnframe: id entropy: %v", err))
	}
	g.last = u
	return u
}

// increment adds one to the big-endian number in b and reports whether it
// did not overflow.
func increment(b []byte) bool {
	for i := len(b) - 1; i >= 0; i-- {
		b[i]++
		if b[i] != 0 {
			return true
		}
	}
	return false
}

// ConversationID returns a new ConversationID stamped with now.
func (g *IDGenerator) ConversationID(now time.Time) ConversationID {
	return ConversationID{u: g.next(now)}
}

// TurnID returns a new TurnID stamped with now.
func (g *IDGenerator) TurnID(now time.Time) TurnID { return TurnID{u: g.next(now)} }

// EventID returns a new EventID stamped with now.
func (g *IDGenerator) EventID(now time.Time) EventID { return EventID{u: g.next(now)} }

// OutboxID returns a new OutboxID stamped with now.
func (g *IDGenerator) OutboxID(now time.Time) OutboxID { return OutboxID{u: g.next(now)} }

// AttemptID returns a new AttemptID stamped with now.
func (g *IDGenerator) AttemptID(now time.Time) AttemptID { return AttemptID{u: g.next(now)} }
