package runner

import (
	"errors"
	"fmt"
	"time"

	"github.com/engram-memory/engram/pkg/events"
)

// permanentError marks an error that no retry can fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as permanent: the runner terminates the message and
// dead-letters it. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err is permanent: marked with Permanent, or an
// invalid event (events.ErrInvalidEvent).
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p) || errors.Is(err, events.ErrInvalidEvent)
}

// retryAfterError asks for a specific redelivery delay.
type retryAfterError struct {
	err   error
	delay time.Duration
}

func (e *retryAfterError) Error() string {
	return fmt.Sprintf("%v (retry after %v)", e.err, e.delay)
}
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter marks err as transient with a redelivery delay of d instead of
// the backoff (e.g. until a token budget resets). RetryAfter(nil, d) is nil.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{err: err, delay: d}
}

// unavailableError marks a dependency outage.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }

// Unavailable marks err as "a dependency (model, store) is unavailable": the
// runner naks the message with Config.UnavailableDelay and pauses pulling
// until the gates are ready again. Unavailable(nil) is nil.
//
// An error that has a method `Unavailable() bool` returning true is treated
// the same way, so a dependency's package can mark its errors without
// importing this one.
func Unavailable(err error) error {
	if err == nil {
		return nil
	}
	return &unavailableError{err: err}
}

// IsUnavailable reports whether err says a dependency is unavailable.
func IsUnavailable(err error) bool {
	var u *unavailableError
	if errors.As(err, &u) {
		return true
	}
	var m interface{ Unavailable() bool }
	return errors.As(err, &m) && m.Unavailable()
}

// PanicError is what a recovered handler panic becomes (transient).
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("handler panic: %v", e.Value) }

// waitError marks an error as "not yet".
type waitError struct{ err error }

func (e *waitError) Error() string { return e.err.Error() }
func (e *waitError) Unwrap() error { return e.err }

// Wait marks err as "not yet": the event waits for something another worker
// or another run does (the transcript the extractor has not stored yet, a
// session another run holds), not for a failure to pass. The runner keeps
// the message (InProgress while it waits, its handler slot free) and calls
// the handler again after a short backoff (Config.WaitMax at most), so the
// wait spends no delivery: a long outage upstream can no longer push a
// valid event to its delivery limit and into the dead-letter stream. A wait
// longer than Config.MaxWait in all is treated as a transient failure.
// Wait(nil) is nil.
//
// An error with a method `Wait() bool` returning true is treated the same
// way, so a handler's package can mark its errors without importing this
// one.
func Wait(err error) error {
	if err == nil {
		return nil
	}
	return &waitError{err: err}
}

// IsWait reports whether err says the event must wait (Wait).
func IsWait(err error) bool {
	var w *waitError
	if errors.As(err, &w) {
		return true
	}
	var m interface{ Wait() bool }
	return errors.As(err, &m) && m.Wait()
}
