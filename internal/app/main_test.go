package app_test

import (
	"testing"

	"go.uber.org/goleak"
)

// A stopped process leaves no goroutine behind (HTTP client keep-alive
// connections of the tests themselves aside).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}
