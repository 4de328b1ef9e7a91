package main

import (
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestPruneSaysAnAgeOfTooManyDaysIsTooMany: --older-than 40000d (or
// +Infd) was refused as "not a number of days", which it is; the refusal
// now says what is wrong with it. A mistyped number is still not one.
func TestPruneSaysAnAgeOfTooManyDaysIsTooMany(t *testing.T) {
	f := mustFixture(t)
	tests := []struct{ age, says string }{
		{"36501d", "more than 36500 days"},
		{"40000d", "more than 36500 days"},
		{"+Infd", "more than 36500 days"},
		{"1e400d", "not a number of days"},
		{"NaNd", "not a number of days"},
		{"-1d", "not a number of days"},
	}
	for _, tt := range tests {
		t.Run(tt.age, func(t *testing.T) {
			is := is.New(t)
			code, stdout, stderr := cli(t, "prune", "--db", f.path, "--older-than", tt.age)
			is.Equal(code, exitUsage)                  // a usage error
			is.True(strings.Contains(stderr, tt.says)) // says why
			is.Equal(stdout, "")                       // nothing deleted
		})
	}
}
