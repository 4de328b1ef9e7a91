package pgstore_test

import (
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe/pgstore"
)

func TestSetsSetting(t *testing.T) {
	for _, tt := range []struct {
		name   string
		params map[string]string
		want   bool
	}{
		{"a parameter of its own", map[string]string{"lock_timeout": "1s"}, true},
		{"a parameter in another case", map[string]string{"Lock_Timeout": "1s"}, true},
		{"options -c", map[string]string{"options": "-c lock_timeout=1s"}, true},
		{"options -c joined", map[string]string{"options": "-clock_timeout=1s"}, true},
		{"options --", map[string]string{"options": "--lock-timeout=1s"}, true},
		{"among others", map[string]string{"options": "-c search_path=x --lock_timeout=1s"}, true},
		{"flags joined", map[string]string{"options": "-ec lock_timeout=1s"}, true},
		{"flags joined with the setting", map[string]string{"options": "-eclock_timeout=1s"}, true},
		{"after a flag's argument", map[string]string{"options": "-p 5432 -c lock_timeout=1s"}, true},
		{"another flag's argument", map[string]string{"options": "-Bc lock_timeout=1s"}, false},
		{"none", map[string]string{"application_name": "app"}, false},
		{"deadlock_timeout", map[string]string{"options": "--deadlock_timeout=2s"}, false},
		{"a value holding the name", map[string]string{"options": "--application_name=lock_timeout_watch"}, false},
		{"an escaped space in a value", map[string]string{"options": `-c application_name=a\ --lock_timeout=1s`}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(pgstore.SetsSetting(tt.params, "lock_timeout"), tt.want)
		})
	}
}
