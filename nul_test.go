package turnframe_test

import (
	"errors"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// Each check's doc says it refuses a NUL byte ("… bytes of UTF-8 without a
// NUL byte"): a NUL is valid UTF-8, and PostgreSQL cannot store it in text.
func TestChecksRefuseANulByte(t *testing.T) {
	for name, err := range map[string]error{
		"CheckText":        turnframe.CheckText("a\x00b"),
		"Limits.CheckText": turnframe.Limits{}.CheckText("a\x00b"),
		"CheckCode":        turnframe.CheckCode("code", "a\x00b"),
		"AccountID":        turnframe.AccountID("a\x00b").Validate(),
		"CaseKey":          turnframe.CaseKey("a\x00b").Validate(),
		"CheckWorker":      turnframe.CheckWorker("a\x00b"),
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			is.True(errors.Is(err, turnframe.ErrInvalid)) // a NUL byte is refused
		})
	}
}
