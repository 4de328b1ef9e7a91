// Package storekit holds what only a turnframe.Store implementation calls:
// the state machines of the command journal and the outbox as pure
// functions, the constructors of the audit trail's records, and the inbox's
// redelivery rule. Applications never need it; it lives apart from package
// turnframe so that the application's API comes first there.
//
// A store calls these rules inside its write transaction with a row as it
// is stored, writes back what they return, and appends the history records
// they build in the same transaction, so that every store obeys one set of
// rules: a rule lives here once, and storetest.Run proves each store applies
// it. The rules package turnframe applies itself too (NextPhase,
// Unfinished, Stranded, LeaseEnded, OutboxKey, SameCommand, the Check
// functions) stay in package turnframe, where a store calls them as well.
//
// Every function here is pure: no I/O, no clock, no state. Errors are
// package turnframe's sentinels (ErrConflict for a move a machine refuses,
// ErrInvalid for bad input), wrapped with what was refused.
package storekit
