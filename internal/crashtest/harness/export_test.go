package harness

// ResentBefore exposes resentBefore to the external tests.
var ResentBefore = resentBefore
