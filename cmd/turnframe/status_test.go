package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestStatusNeedsIntervention proves that status counts the rows and
// entries that need a person, and lists them before anything else.
func TestStatusNeedsIntervention(t *testing.T) {
	f := mustFixture(t)
	escalate(t, f) // the fixture's unknown row and unknown entry, as the policy escalates them
	t.Run("CountsAndListsThemFirst", func(t *testing.T) {
		is := is.New(t)
		code, out, stderr := cli(t, "status", "--db", f.path)
		is.Equal(stderr, "")
		is.Equal(code, exitOK)
		is.True(strings.Contains(out, "needs intervention:  outbox rows 1, journal entries 1 (a person must settle each)"))
		is.True(strings.Contains(out, "outcome unknown:     outbox rows 0, journal entries 0"))
		is.True(strings.Contains(out, "outcome_unknown 0  needs_intervention 1"))
		rows := strings.Index(out, "outbox rows that need intervention")
		entries := strings.Index(out, "journal entries that need intervention")
		leases := strings.Index(out, "claims whose lease ended")
		is.True(rows > 0 && entries > rows && leases > entries) // what needs a person comes first
		is.True(strings.Contains(out, f.unknown.String()+"  acme     key-hang  hang         1         turnframe.policy.no_safe_resolution"))
		is.True(strings.Contains(out, "acme     key-ask-remote  ask-remote  "+f.unknownDelivered.String()))
		is.True(strings.Contains(out, "turnframe settle ID completed|failed|resend"))
		is.True(strings.Contains(out, "turnframe settle --account A KEY completed|failed|resend"))
	})
	t.Run("JSON", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "status", "--db", f.path, "--json")
		is.Equal(code, exitOK)
		var st statusJSON
		is.NoErr(json.Unmarshal([]byte(out), &st))
		is.Equal(st.NeedsInterventionRows, 1)
		is.Equal(st.NeedsInterventionJournal, 1)
		is.Equal(len(st.NeedsIntervention), 1)
		is.Equal(st.NeedsIntervention[0].ID, f.unknown.String())
		is.Equal(st.NeedsIntervention[0].Status, "needs_intervention")
		is.Equal(len(st.NeedsInterventionEntries), 1)
		is.Equal(st.NeedsInterventionEntries[0].Key, "key-ask-remote")
		is.Equal(st.NeedsInterventionEntries[0].Account, "acme")
		is.Equal(st.NeedsInterventionEntries[0].Status, "needs_intervention")
		is.Equal(st.UnknownRows, 0)
		is.Equal(st.UnknownJournal, 0)
		is.Equal(st.Outbox["needs_intervention"], 1)
	})
	// A row that needs intervention holds its order key, as an unknown one
	// does: the row behind it is still held, not due.
	t.Run("ItHoldsItsOrderKey", func(t *testing.T) {
		is := is.New(t)
		code, out, _ := cli(t, "status", "--db", f.path, "--json")
		is.Equal(code, exitOK)
		var st statusJSON
		is.NoErr(json.Unmarshal([]byte(out), &st))
		is.Equal(st.Held, 1)
		is.Equal(st.DueNow, 1)
	})
}
