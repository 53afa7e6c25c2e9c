package health_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine of the package (consumers, sweeps, servers) stops.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
