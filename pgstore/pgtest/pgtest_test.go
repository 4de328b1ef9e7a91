package pgtest_test

import (
	"net/url"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe/pgstore/pgtest"
)

func TestWithParams(t *testing.T) {
	params := url.Values{"search_path": {"t_x"}, "lock_timeout": {"50"}}
	for _, tc := range []struct{ name, in, want string }{
		{"AURLKeepsItsQuery", "postgres:///db?host=/run/pg", "postgres:///db?host=%2Frun%2Fpg&lock_timeout=50&search_path=t_x"},
		{"AURLReplacesAValue", "postgres://h/db?search_path=old", "postgres://h/db?lock_timeout=50&search_path=t_x"},
		{"AKeyValueStringGainsSortedPairs", "host=/run/pg dbname=db", "host=/run/pg dbname=db lock_timeout=50 search_path=t_x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(pgtest.WithParams(t, tc.in, params), tc.want) // the parameters, set once each
		})
	}
}
