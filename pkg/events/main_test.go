package events_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test (servers, clients, Inject subscriptions) must leave no goroutine
// behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
