package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// command is one subcommand: its name, its help, and how it runs.
type command struct {
	name    string
	args    string // the positional arguments, for the synopsis ("ID")
	summary string // one line, for the command list
	help    string // what it does, in a few lines
	// flags registers the command's flags on fs and returns its body, which
	// runs with the positional arguments once the flags are parsed.
	flags func(fs *flag.FlagSet) func(ctx context.Context, e *env, args []string) error
}

// commandList returns every command, in the order help lists them.
func commandList() []*command {
	return []*command{
		demoCommand(),
		statusCommand(),
		outboxCommand(),
		turnsCommand(),
		showCommand(),
		historyCommand(),
		settleCommand(),
		approvalsCommand(),
		approveCommand(),
		denyCommand(),
		requeueCommand(),
		releaseCommand(),
		pruneCommand(),
		migrateCommand(),
		versionCommand(),
		uiCommand(),
	}
}

func lookup(name string) *command {
	for _, c := range commandList() {
		if c.name == name {
			return c
		}
	}
	return nil
}

// run parses args against the command's flags, with flags and positional
// arguments in any order, and runs its body. -h prints the help on stdout.
func (c *command) run(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {} // parse reports; the full help is for -h
	body := c.flags(fs)
	positional, err := parseInterleaved(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		w := &stickyWriter{w: e.stdout}
		c.printHelp(w, fs)
		if w.err != nil {
			return fmt.Errorf("write the help: %w", w.err) // asked for and not shown
		}
		return errHelpShown
	case err != nil:
		// The flag package printed what was wrong.
		fmt.Fprintf(e.stderr, "run 'turnframe %s -h' for help\n", c.name)
		return errUsageShown
	}
	return body(ctx, e, positional)
}

// parseInterleaved parses args with fs, letting flags follow positional
// arguments ("show ID --json"), and returns the positional arguments. After
// "--" everything is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// printHelp writes the command's synopsis, help and flags to w.
func (c *command) printHelp(w io.Writer, fs *flag.FlagSet) {
	synopsis := "turnframe " + c.name
	if hasFlags(fs) {
		synopsis += " [flags]"
	}
	if c.args != "" {
		synopsis += " " + c.args
	}
	fmt.Fprintf(w, "usage: %s\n\n%s\n", synopsis, strings.TrimSpace(c.help))
	if hasFlags(fs) {
		fmt.Fprintf(w, "\nflags:\n")
		out := fs.Output()
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(out)
	}
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// printUsage writes the list of commands to w.
func printUsage(w io.Writer) {
	fmt.Fprintf(w, "turnframe: the turnframe demo and the operator's tool for a turnframe database\n\n")
	fmt.Fprintf(w, "usage: turnframe COMMAND [flags] [args]\n\ncommands:\n")
	for _, c := range commandList() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\n--db takes a database file, or a postgres:// URL (its search_path is the schema).\n")
	fmt.Fprintf(w, "Run 'turnframe help COMMAND' or 'turnframe COMMAND -h' for a command's flags.\n")
	fmt.Fprintf(w, "Exit status: 0 done; 1 could not be done now (busy, I/O) or the demo found a discrepancy;\n")
	fmt.Fprintf(w, "2 cannot succeed as given (bad flag, unknown id, wrong status, not a turnframe database,\n")
	fmt.Fprintf(w, "  a PostgreSQL database, login or privilege the server refuses,\n")
	fmt.Fprintf(w, "  or a schema older or newer than this turnframe's: only 'migrate' changes a schema);\n")
	fmt.Fprintf(w, "3 done, but its confirmation could not be written (stdout on a full disk): look, do not run it again.\n")
}

// runHelp prints the list of commands, or one command's help; help that
// could not be written exits 1.
func runHelp(e *env, args []string) int {
	w := &stickyWriter{w: e.stdout}
	if len(args) == 0 {
		printUsage(w)
	} else {
		c := lookup(args[0])
		if c == nil {
			fmt.Fprintf(e.stderr, "turnframe help: unknown command %q\n", args[0])
			return exitUsage
		}
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.flags(fs)
		c.printHelp(w, fs)
	}
	if w.err != nil {
		fmt.Fprintf(e.stderr, "turnframe help: write the help: %v\n", w.err)
		return exitFailure
	}
	return exitOK
}
