package turnframe

import (
	"context"
	"sync"
)

// CodeNoHandler is the code a Mux rejects a command with when no handler is
// registered for its name. The command is Rejected for good (it took no
// effect, and it is never run again under its key): registering the name
// later does not revive it.
const CodeNoHandler = "turnframe.mux.no_handler"

// Mux is a Handler that hands each command to the handler registered for
// its Command.Name, so an application writes one handler per command
// instead of a switch. A command whose name has no handler is answered
// Reject(CodeNoHandler): never a panic, never an unknown outcome.
//
// The zero Mux is ready to use and has no handler. Register the handlers
// before the Mux is handed to Runtime.Execute; a Mux is safe for concurrent
// use, registration included. The registration methods are Register and
// RegisterFunc, because Handle is the method that makes a Mux a Handler.
type Mux struct {
	mu       sync.RWMutex
	handlers map[string]Handler
}

// Register makes h the handler of the commands named name. It panics — a
// programming error, not an input — when name is not a command name
// Command.Validate accepts (empty, over MaxNameLen bytes, not UTF-8), when h
// is nil, or when name already has a handler.
func (m *Mux) Register(name string, h Handler) {
	if err := checkString("name", name, 1, MaxNameLen); err != nil {
		panic("turnframe: Mux.Register: " + err.Error())
	}
	if isNil(h) {
		panic("turnframe: Mux.Register: a nil handler for " + name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.handlers[name]; ok {
		panic("turnframe: Mux.Register: a second handler for " + name)
	}
	if m.handlers == nil {
		m.handlers = make(map[string]Handler)
	}
	m.handlers[name] = h
}

// RegisterFunc makes f the handler of the commands named name, as
// Register(name, HandlerFunc(f)) does, and panics as Register does (f nil
// included).
func (m *Mux) RegisterFunc(name string, f func(ctx context.Context, call Call) Outcome) {
	if f == nil {
		panic("turnframe: Mux.RegisterFunc: a nil function for " + name)
	}
	m.Register(name, HandlerFunc(f))
}

// Handle calls the handler registered for call.Command.Name and returns its
// outcome as it is (its panic, too, which Execute records as an unknown
// outcome). It returns Reject(CodeNoHandler) without calling anything when
// the name has no handler.
func (m *Mux) Handle(ctx context.Context, call Call) Outcome {
	m.mu.RLock()
	h, ok := m.handlers[call.Command.Name]
	m.mu.RUnlock()
	if !ok {
		return Reject(CodeNoHandler)
	}
	return h.Handle(ctx, call)
}
