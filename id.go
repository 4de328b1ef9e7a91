package turnframe

import (
	"crypto/rand"
	"errors"
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
// steps back. It is safe for concurrent use.
//
// ulid.Make is unique but not ordered under contention (it reads the clock
// before taking its lock); IDGenerator reads the time under its own lock and
// never goes below the last millisecond it used.
//
// The zero value is not usable; call NewIDGenerator.
type IDGenerator struct {
	mu      sync.Mutex
	lastMS  uint64
	entropy *ulid.MonotonicEntropy
}

// NewIDGenerator returns a generator drawing entropy from crypto/rand.
func NewIDGenerator() *IDGenerator {
	return NewIDGeneratorFrom(rand.Reader)
}

// NewIDGeneratorFrom returns a generator drawing entropy from r, for tests
// that need reproducible ids. r is only read under the generator's lock.
// It panics if r is nil.
func NewIDGeneratorFrom(r io.Reader) *IDGenerator {
	if r == nil {
		panic("turnframe: NewIDGeneratorFrom with a nil reader")
	}
	return &IDGenerator{entropy: ulid.Monotonic(r, 0)}
}

func (g *IDGenerator) next(now time.Time) ulid.ULID {
	g.mu.Lock()
	defer g.mu.Unlock()
	ms := ulid.Timestamp(now)
	if ms < g.lastMS {
		ms = g.lastMS
	}
	for {
		u, err := ulid.New(ms, g.entropy)
		if err == nil {
			g.lastMS = ms
			return u
		}
		if !errors.Is(err, ulid.ErrMonotonicOverflow) {
			// crypto/rand does not fail; a caller's reader that does is a
			// programming error in a test fixture.
			panic(fmt.Sprintf("turnframe: id entropy: %v", err))
		}
		ms++ // the millisecond is spent: move to the next one
	}
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
