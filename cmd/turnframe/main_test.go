package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// cli runs the command line args as main would and returns its exit status
// and what it wrote.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestHelp(t *testing.T) {
	t.Run("NoArgumentsPrintsTheCommandsAndExits2", func(t *testing.T) {
		is := is.New(t)
		code, _, stderr := cli(t)
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, "commands:"))
	})
	t.Run("HelpListsEveryCommand", func(t *testing.T) {
		is := is.New(t)
		code, stdout, _ := cli(t, "help")
		is.Equal(code, exitOK)
		for _, c := range commandList() {
			is.True(strings.Contains(stdout, "\n  "+c.name+" ")) // listed
		}
	})
	for _, c := range commandList() {
		t.Run("HelpOf_"+c.name, func(t *testing.T) {
			is := is.New(t)
			code, stdout, _ := cli(t, "help", c.name)
			is.Equal(code, exitOK)
			is.True(strings.HasPrefix(stdout, "usage: turnframe "+c.name))
			is.True(strings.Contains(stdout, "flags:"))

			code, dashH, _ := cli(t, c.name, "-h")
			is.Equal(code, exitOK)
			is.Equal(dashH, stdout) // -h prints the same help
		})
	}
	t.Run("UnknownCommandExits2", func(t *testing.T) {
		is := is.New(t)
		code, _, stderr := cli(t, "frobnicate")
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, `unknown command "frobnicate"`))
	})
	t.Run("HelpOfAnUnknownCommandExits2", func(t *testing.T) {
		is := is.New(t)
		code, _, _ := cli(t, "help", "frobnicate")
		is.Equal(code, exitUsage)
	})
}

func TestBadFlags(t *testing.T) {
	for _, c := range commandList() {
		t.Run("UndefinedFlagOf_"+c.name, func(t *testing.T) {
			is := is.New(t)
			code, stdout, stderr := cli(t, c.name, "--no-such-flag")
			is.Equal(code, exitUsage)
			is.Equal(stdout, "")
			is.True(strings.Contains(stderr, "no-such-flag"))
			is.True(strings.Contains(stderr, "turnframe "+c.name+" -h"))
		})
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"StatusWithoutDB", []string{"status"}, "--db is required"},
		{"OutboxWithABadStatus", []string{"outbox", "--db", "x.db", "--status", "lost"}, "not an outbox status"},
		{"OutboxWithABadLimit", []string{"outbox", "--db", "x.db", "--limit", "0"}, "--limit 0"},
		{"ShowWithoutID", []string{"show", "--db", "x.db"}, "missing"},
		{"ShowWithABadID", []string{"show", "--db", "x.db", "not-an-id"}, "not an id"},
		{"SettleWithABadVerdict", []string{"settle", "--db", "x.db", "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3", "maybe"}, "not a verdict"},
		{"SettleWithoutVerdict", []string{"settle", "--db", "x.db", "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3"}, "missing the verdict"},
		{"SettleUnresolved", []string{"settle", "--db", "x.db", "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3", "unresolved"}, "not a verdict"},
		{"SettleAsThePolicy", []string{"settle", "--db", "x.db", "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3", "completed", "--actor", "policy"}, "may not settle by hand"},
		{"SettleAsAWorker", []string{"settle", "--db", "x.db", "--account", "a", "k", "completed", "--actor", "worker:w1"}, "may not settle by hand"},
		{"SettleWithAnEmptyActor", []string{"settle", "--db", "x.db", "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3", "completed", "--actor", ""}, "--actor"},
		{"SettleAKeyWithoutIt", []string{"settle", "--db", "x.db", "--account", "acme"}, "missing the key"},
		{"SettleAKeyWithoutVerdict", []string{"settle", "--db", "x.db", "--account", "acme", "k1"}, "missing the verdict"},
		{"SettleWithALongNote", []string{"settle", "--db", "x.db", "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3", "failed", "--note", strings.Repeat("n", 1025)}, "--note is 1025 bytes"},
		{"HistoryWithoutID", []string{"history", "--db", "x.db"}, "missing"},
		{"HistoryWithABadID", []string{"history", "--db", "x.db", "not-an-id"}, "not an id"},
		{"HistoryOfAKeyWithoutIt", []string{"history", "--db", "x.db", "--account", "acme"}, "missing the key"},
		{"HistoryWithAStrayArgument", []string{"history", "--db", "x.db", "01J9Z3K8Q5R6S7T8V9W0X1Y2Z3", "extra"}, `unexpected argument "extra"`},
		{"ReleaseWithAnAge", []string{"release", "--db", "x.db", "--older-than", "10m"}, "takes no age"},
		{"ReleaseWithABadID", []string{"release", "--db", "x.db", "--force", "nope"}, `"nope" is not an id`},
		{"PruneWithoutOlderThan", []string{"prune", "--db", "x.db"}, "--older-than is required"},
		{"PruneWithABadAge", []string{"prune", "--db", "x.db", "--older-than", "soon"}, "not a duration"},
		{"PruneWithANegativeAge", []string{"prune", "--db", "x.db", "--older-than", "-1h"}, "negative"},
		{"AStrayArgument", []string{"status", "--db", "x.db", "extra"}, `unexpected argument "extra"`},
		{"DemoWithAStrayArgument", []string{"demo", "extra"}, `unexpected argument "extra"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			code, _, stderr := cli(t, tc.args...)
			is.Equal(code, exitUsage)
			is.True(strings.Contains(stderr, tc.want)) // the error says what is wrong
		})
	}
}

func TestAgeFlag(t *testing.T) {
	t.Run("TakesDurationsAndDays", func(t *testing.T) {
		is := is.New(t)
		var a ageFlag
		is.NoErr(a.Set("90m"))
		is.Equal(a.d.String(), "1h30m0s")
		is.NoErr(a.Set("1.5d"))
		is.Equal(a.d.String(), "36h0m0s")
	})
	t.Run("RefusesNegativeAndGarbage", func(t *testing.T) {
		is := is.New(t)
		var a ageFlag
		is.True(a.Set("-2d") != nil)
		is.True(a.Set("-1s") != nil)
		is.True(a.Set("d") != nil)
		is.True(a.Set("tomorrow") != nil)
	})
}

func TestParseInterleaved(t *testing.T) {
	t.Run("FlagsMayFollowArguments", func(t *testing.T) {
		is := is.New(t)
		code, _, stderr := cli(t, "show", "not-an-id", "--db", "x.db", "--json")
		is.Equal(code, exitUsage)
		is.True(strings.Contains(stderr, `"not-an-id" is not an id`)) // --db and --json were parsed after the id
	})
}
