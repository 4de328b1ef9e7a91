package sqlitestore

// Exported for the external tests, which read the hot queries' plans.
const (
	ClaimSQL        = claimSQL
	UnfinishedSQL   = unfinishedSQL
	ExpireSQL       = expireSQL
	HistorySQL      = historySQL
	PruneHistorySQL = pruneHistorySQL
	PruneSQL        = pruneSQL
	HoldSQL         = holdSQL
	LetGoSQL        = letGoSQL
	HoldLaterSQL    = holdLaterSQL
	ReadOutboxSQL   = readOutboxSQL
	ExtendSQL       = extendSQL
	SettleOutboxSQL = settleOutboxSQL
	AdoptEntrySQL   = adoptEntrySQL
	CountPendingSQL = countPendingSQL
	MessageTurnSQL  = messageTurnSQL
)

// ListOutboxSQL is listOutboxSQL, ListOutbox's statement for a filter.
var ListOutboxSQL = listOutboxSQL

// SettleBatchSQL is settleBatchSQL, the statement of n settlements.
var SettleBatchSQL = settleBatchSQL

// Translate is translate, for the tests of driver errors no store call
// produces on demand.
var Translate = translate

// WriterWaits returns how many times a call waited for the writer pool's one
// connection.
func WriterWaits(s *Store) int64 { return s.write.Stats().WaitCount }

// WriterConnections returns how many connections the writer pool has open,
// in use or idle.
func WriterConnections(s *Store) int { return s.write.Stats().OpenConnections }

// UnpreparedStatements returns how many statements s's write transactions
// ran from their text instead of a statement prepared at Open.
func UnpreparedStatements(s *Store) int64 { return s.stmts.unprepared.Load() }

// UnpreparedReads returns how many reads of s ran from their text instead
// of a statement prepared at Open.
func UnpreparedReads(s *Store) int64 { return s.reads.p.unprepared.Load() }
