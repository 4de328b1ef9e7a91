package pgstore

import "strings"

// SetsSetting reports whether a connection's parameters — the
// RuntimeParams of a pgconn.Config, as pgx parsed them from a URL and the
// environment — set the server setting name (such as "lock_timeout"): as a
// parameter of its own, or inside options ("-c name=value",
// "-cname=value", "--name=value"; PGOPTIONS comes in there too). Names
// compare as PostgreSQL compares them: in any case, with '-' read as '_'.
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

// optionSettings returns the names of the settings an options string sets:
// its words split on white space not escaped by a backslash, as the server
// splits them, each "-c name=value" or "--name=value".
func optionSettings(options string) []string {
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
	var names []string
	for i := 0; i < len(words); i++ {
		var set string
		switch word := words[i]; {
		case word == "-c" && i+1 < len(words):
			i++
			set = words[i]
		case strings.HasPrefix(word, "--"):
			set = word[2:]
		case strings.HasPrefix(word, "-c"):
			set = word[2:]
		default:
			continue
		}
		name, _, _ := strings.Cut(set, "=")
		names = append(names, name)
	}
	return names
}
