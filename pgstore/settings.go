package pgstore

import "strings"

// sessionGuardSQL is queued after each write transaction's BEGIN (runTx),
// so it costs no round trip: a setting an application left on a pooled
// session — a plain SET on its own statements or in an App, a role's or a
// database's default, the URL's options — must not weaken what the
// store's transaction promises.
//
//   - Its COMMIT is durable before it is acknowledged: synchronous_commit
//     off (or local) is raised to on for the transaction, a stronger
//     setting (remote_write, remote_apply) kept. An acknowledged commit
//     lost in a crash would run a settled key again (I14) or send a
//     claimed row twice.
//   - Its lock waits are bounded by the lock_timeout the pool's
//     connections had when New ran ($1: Open's DefaultLockTimeout, or the
//     URL's), not by one an App set to 0 for its own statements and left.
//   - The server reads its strings as UTF-8, as pgx sends them, and as
//     pgx told it when it connected: a session set to another encoding
//     stored the key "clé" as "clÃ©", which another session's "clé" does
//     not match, so the key was admitted again (I14). The statements after
//     this one in the pipeline are read after it ran.
//
// An App on the transaction may still SET LOCAL either after it, for the
// transaction: its own choice, in the open.
const sessionGuardSQL = `SELECT set_config('lock_timeout', $1, true),
	CASE WHEN current_setting('synchronous_commit') IN ('off', 'local') THEN set_config('synchronous_commit', 'on', true) END,
	CASE WHEN current_setting('client_encoding') <> 'UTF8' THEN set_config('client_encoding', 'UTF8', true) END`

// SetsSetting reports whether a connection's parameters — the
// RuntimeParams of a pgconn.Config, as pgx parsed them from a URL and the
// environment — set the server setting name (such as "lock_timeout"): as a
// parameter of its own, or inside options ("-c name=value",
// "-cname=value", "--name=value", flags joined as "-ec name=value";
// PGOPTIONS comes in there too). Names compare as PostgreSQL compares
// them: in any case, with '-' read as '_'.
// A setting whose name merely contains name (deadlock_timeout for
// lock_timeout) does not count.
func SetsSetting(params map[string]string, name string) bool {
	want := settingName(name)
	for k, v := range params {
		if settingName(k) == want {
			return true
		}
		if settingName(k) != "options" {
			continue
		}
		for _, s := range optionSettings(v) {
			if settingName(s) == want {
				return true
			}
		}
	}
	return false
}

// settingName is name as PostgreSQL matches it.
func settingName(name string) string {
	return strings.ToLower(strings.ReplaceAll(name, "-", "_"))
}

// optionSettings returns the names of the settings an options string sets,
// read as the server reads it: words split on white space not escaped by a
// backslash, then each word getopt's way, flags joined in one word
// ("-ec name=value") as well as apart; a setting is the argument of -c
// ("-c name=value", "-cname=value") or of - ("--name=value").
func optionSettings(options string) []string {
	words := optionWords(options)
	var names []string
	for i := 0; i < len(words); i++ {
		word := words[i]
		if len(word) < 2 || word[0] != '-' {
			continue
		}
		for j := 1; j < len(word); j++ {
			flag := word[j]
			if !strings.ContainsRune(backendArgFlags, rune(flag)) {
				continue // a flag without an argument, such as -e
			}
			arg := word[j+1:]
			if arg == "" && i+1 < len(words) {
				i++
				arg = words[i]
			}
			if flag == 'c' || flag == '-' {
				name, _, _ := strings.Cut(arg, "=")
				names = append(names, name)
			}
			break // the argument ends the word
		}
	}
	return names
}

// backendArgFlags are the server's command-line flags that take an
// argument, as its getopt string gives them.
const backendArgFlags = "BcCDdfhkNprStvW-"

// optionWords splits options on white space not escaped by a backslash.
func optionWords(options string) []string {
	var words []string
	var w strings.Builder
	escaped := false
	for _, r := range options {
		switch {
		case escaped:
			w.WriteRune(r)
			escaped = false
		case r == '\\':
			escaped = true
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
			if w.Len() > 0 {
				words, w = append(words, w.String()), strings.Builder{}
			}
		default:
			w.WriteRune(r)
		}
	}
	if w.Len() > 0 {
		words = append(words, w.String())
	}
	return words
}
