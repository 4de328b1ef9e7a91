package turnframe

// KeeperCadence is keeperCadence, for the test of the keeper's cadence.
var KeeperCadence = keeperCadence
