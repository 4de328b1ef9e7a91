package sqlitestore

// Exported for the external tests, which read the hot queries' plans.
const (
	ClaimSQL      = claimSQL
	UnfinishedSQL = unfinishedSQL
	ReleaseSQL    = releaseSQL
	PruneSQL      = pruneSQL
	HoldSQL       = holdSQL
	LetGoSQL      = letGoSQL
	HoldLaterSQL  = holdLaterSQL
	ReadOutboxSQL = readOutboxSQL
)

// UnpreparedStatements returns how many statements s's write transactions
// ran from their text instead of a statement prepared at Open.
func UnpreparedStatements(s *Store) int64 { return s.stmts.unprepared.Load() }
