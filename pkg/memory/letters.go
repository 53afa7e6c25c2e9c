package memory

import (
	"context"
	"time"
)

// Letters keeps dead letters that the dead-letter stream refused (full or
// unreachable) until it takes them (internal/runner/dlq.Parking). A worker
// parks a letter here before it terminates the event the letter is about, so
// that a poison event never holds its consumer's delivery slots while the
// stream refuses letters, and no letter is dropped: the store is what every
// valid event needs anyway, so parking costs what the healthy path costs.
//
// Letters are not tenant data: a letter is the raw message the workers could
// not handle (possibly undecodable, with no tenant), kept apart from every
// project and read only by the process that moves it to the stream.
type Letters interface {
	// ParkLetter stores data under key (dlq.MsgID of the letter), replacing
	// a letter parked under the same key (same message: same letter) but
	// keeping its first parking time.
	ParkLetter(ctx context.Context, key string, data []byte) error
	// ParkedLetters returns up to limit letters (limit <= 0: all), first
	// parked first.
	ParkedLetters(ctx context.Context, limit int) ([]ParkedLetter, error)
	// CountParkedLetters is how many letters are parked.
	CountParkedLetters(ctx context.Context) (int, error)
	// DropParkedLetter removes the letter under key; absent is not an
	// error (two movers may race).
	DropParkedLetter(ctx context.Context, key string) error
}

// ParkedLetter is one parked dead letter.
type ParkedLetter struct {
	Key    string
	Data   []byte
	Parked time.Time // when it was first parked (store clock)
}
