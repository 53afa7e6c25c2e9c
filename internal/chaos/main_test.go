package chaos_test

import (
	"os"
	"testing"
)

// TestMain removes the binaries' temporary dir (built once for every run
// of the test binary, cluster.build) after the runs.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.temp {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}
