// Package harness is the crash harness of turnframe, for any store: it runs
// the test binary again as child processes that work on one database at
// once — turns through the Runtime, dispatch to a remote in the parent
// process, recovery at every start-up — kills them with SIGKILL at random
// points, starts new ones, lets two drain children finish everything, and
// then audits the database against the remote's ledger and the audit trail:
// no effect lost, none applied twice where the remote's kind allows it to
// be told, every outbox row there if and only if its command committed,
// every history complete, the application's rows in the same commits.
//
// A store plugs in through Backend; the package that runs the harness calls
// Main from its TestMain and CrashRecovery (and ThreeProcessesDispatchOneDatabase,
// CLIAlongsideAWriter) from its tests. internal/crashtest runs it on
// SQLite, pgstore/internal/pgcrash on PostgreSQL. RELIABILITY.md says what
// it proves and gives its figures.
package harness
