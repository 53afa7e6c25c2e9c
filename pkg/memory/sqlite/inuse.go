package sqlite

import "errors"

// ErrInUse is the error of Open when another process holds the database:
// one process per database file (the in-memory indexes of two would
// diverge), and that process is typically a running `engram serve`.
var ErrInUse = errors.New("the database is held by another process")
