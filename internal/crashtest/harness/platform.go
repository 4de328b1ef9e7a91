package harness

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/turnframe/turnframe"
)

// The platform of the crash harness (issue 15): the channel that delivers
// the users' messages to the children. It is a log file shared by every
// process of a run, appended to and never rewritten:
//
//	D <worker> <account> <conversation> <message id> <text>
//	R <worker> <account> <message id> <when> <outcome>
//
// A child appends D before it first delivers a message to itself
// (ReceiveMessage), and R once it answered a redelivery of one: when says
// at which moment the platform redelivered it (whenNow, whenLater,
// whenStartup, whenDrain), outcome whether the redelivery found the turn
// the first delivery began (outcomeAnswered) or began it, the first
// delivery having never landed (outcomeBegan). Every line is one write(2)
// on a file opened O_APPEND, so the lines of two processes never
// interleave; a line cut short all the same (a kill mid-write) is ignored
// when read, as is a last line without its newline.
const (
	whenNow     = "now"     // at once after the first delivery, before or after the turn ran
	whenLater   = "later"   // a few turns after the first delivery
	whenStartup = "startup" // by a work child at start-up, often right after a kill
	whenDrain   = "drain"   // by a drain child at start-up: every message not redelivered yet

	outcomeAnswered = "answered" // the turn of the first delivery was found
	outcomeBegan    = "began"    // the redelivery began the turn
)

// message is one user message as the platform knows it.
type message struct {
	worker       string // the child that delivered it first
	account      turnframe.AccountID
	conversation turnframe.ConversationID
	id           turnframe.MessageID
	text         string
}

// key names the message within a run: message ids are per account.
func (m message) key() string { return string(m.account) + "\x00" + string(m.id) }

func (m message) inbound() turnframe.Inbound {
	return turnframe.Inbound{Account: m.account, Conversation: m.conversation, MessageID: m.id, Text: m.text}
}

// messageID is the id the platform gives a message: one per text, and so
// per (account, text), ids being scoped to an account.
func messageID(text string) turnframe.MessageID { return turnframe.MessageID("msg-" + text) }

// redelivery is one R line.
type redelivery struct {
	worker  string
	key     string // the message's key
	when    string
	outcome string
}

// platform is a child's handle on the log.
type platform struct {
	path string
	f    *os.File
}

// openPlatform opens the log at path for appending, creating it.
func openPlatform(path string) (*platform, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the platform's log: %w", err)
	}
	return &platform{path: path, f: f}, nil
}

func (p *platform) Close() error { return p.f.Close() }

// delivering appends the D line of a message about to be delivered first.
func (p *platform) delivering(worker string, m message) error {
	return p.append(fmt.Sprintf("D %s %s %s %s %s\n", worker, m.account, m.conversation, m.id, m.text))
}

// answered appends the R line of a redelivery that was answered.
func (p *platform) answered(worker string, m message, when, outcome string) error {
	return p.append(fmt.Sprintf("R %s %s %s %s %s\n", worker, m.account, m.id, when, outcome))
}

// append writes line in one write(2).
func (p *platform) append(line string) error {
	if _, err := p.f.WriteString(line); err != nil {
		return fmt.Errorf("append to the platform's log: %w", err)
	}
	return nil
}

// platformLog is what the log holds: the messages in the order they were
// first delivered, and the redeliveries answered.
type platformLog struct {
	messages     []message
	redeliveries []redelivery
	ignored      int // lines that did not parse (cut short by a kill)
}

// readPlatform reads the whole log.
func readPlatform(path string) (platformLog, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return platformLog{}, fmt.Errorf("read the platform's log: %w", err)
	}
	var l platformLog
	if i := bytes.LastIndexByte(b, '\n'); i+1 < len(b) {
		b = b[:i+1] // a last line still being written, or cut short
		l.ignored++
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		if m, ok := parseDelivered(line); ok && !seen[m.key()] {
			seen[m.key()] = true
			l.messages = append(l.messages, m)
			continue
		}
		if r, ok := parseRedelivered(line); ok {
			l.redeliveries = append(l.redeliveries, r)
			continue
		}
		l.ignored++
	}
	return l, nil
}

// notRedelivered returns the messages no R line names yet.
func (l platformLog) notRedelivered() []message {
	done := map[string]bool{}
	for _, r := range l.redeliveries {
		done[r.key] = true
	}
	var out []message
	for _, m := range l.messages {
		if !done[m.key()] {
			out = append(out, m)
		}
	}
	return out
}

func parseDelivered(line string) (message, bool) {
	f := strings.Fields(line)
	if len(f) != 6 || f[0] != "D" {
		return message{}, false
	}
	conv, err := turnframe.ParseConversationID(f[3])
	m := message{worker: f[1], account: turnframe.AccountID(f[2]), conversation: conv, id: turnframe.MessageID(f[4]), text: f[5]}
	if err != nil || m.id != messageID(m.text) || m.account.Validate() != nil {
		return message{}, false // a line cut short and continued by another process's
	}
	return m, true
}

func parseRedelivered(line string) (redelivery, bool) {
	f := strings.Fields(line)
	if len(f) != 6 || f[0] != "R" {
		return redelivery{}, false
	}
	r := redelivery{worker: f[1], key: f[2] + "\x00" + f[3], when: f[4], outcome: f[5]}
	switch {
	case r.when != whenNow && r.when != whenLater && r.when != whenStartup && r.when != whenDrain:
		return redelivery{}, false
	case r.outcome != outcomeAnswered && r.outcome != outcomeBegan:
		return redelivery{}, false
	}
	return r, true
}
