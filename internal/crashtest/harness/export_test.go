package harness

// ResentBefore exposes resentBefore to the external tests.
var ResentBefore = resentBefore

// ExplainRow exposes explainRow to the external tests.
var ExplainRow = explainRow

// ResentNeverReceived exposes resentNeverReceived to the external tests.
var ResentNeverReceived = resentNeverReceived
