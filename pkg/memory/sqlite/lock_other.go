//go:build !unix

package sqlite

// lockFile is a no-op where flock is not available: one process per data
// file is then the operator's responsibility.
func lockFile(string) (func(), error) { return func() {}, nil }
