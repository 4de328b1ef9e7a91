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
)
