package turnframe_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/turnframe/turnframe"
)

// TestNewHTTPSenderRefusesAnEndpointNoRequestCanReach: url.Parse takes a
// URL with no host name before its port, or a port out of range, and
// NewHTTPSender took it too; every send to it then failed to dial, was
// retried until its attempts ran out and failed, a configuration's error
// turned into failed effects. It is ErrInvalid at construction now.
func TestNewHTTPSenderRefusesAnEndpointNoRequestCanReach(t *testing.T) {
	tests := []struct {
		url, says string
	}{
		{"http://:80/charges", "names no host"},
		{"https://:443", "names no host"},
		{"http://127.0.0.1:0/", "not one from 1 to 65535"},
		{"http://127.0.0.1:65536/", "not one from 1 to 65535"},
		{"http://payments.internal:99999/charges", "not one from 1 to 65535"},
		{"http://[::1]:70000/", "not one from 1 to 65535"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			is := is.New(t)
			s, err := turnframe.NewHTTPSender(map[string]string{"payments": tt.url})
			is.True(errors.Is(err, turnframe.ErrInvalid))      // refused at construction
			is.True(s == nil)                                  // no sender
			is.True(strings.Contains(err.Error(), tt.says))    // says why
			is.True(strings.Contains(err.Error(), "payments")) // names the destination
		})
	}
	for _, url := range []string{"http://127.0.0.1:1/", "http://127.0.0.1:65535/x", "https://payments.example", "http://[::1]:8080/"} {
		t.Run("accepts "+url, func(t *testing.T) {
			is := is.New(t)
			_, err := turnframe.NewHTTPSender(map[string]string{"payments": url})
			is.NoErr(err) // a reachable URL
		})
	}
}
