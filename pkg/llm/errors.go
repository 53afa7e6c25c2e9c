package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/ollama/ollama/api"
)

// Sentinel errors. Every error a Client returns wraps at most one of them
// (or a context error when the caller's context ended), except
// ErrContextExceeded, which also wraps ErrInvalidRequest; check with
// errors.Is.
var (
	// ErrModelMissing: the configured model is not installed in Ollama.
	// Permanent until someone runs `ollama pull <model>` (the message says so).
	ErrModelMissing = errors.New("llm: model missing")
	// ErrUnavailable: Ollama could not be reached or failed transiently
	// (connection refused, timeout, 5xx). Retry later.
	ErrUnavailable = errors.New("llm: ollama unavailable")
	// ErrInvalidRequest: Ollama will never accept this request (4xx, or a
	// 500 naming an invalid format/schema/option). Permanent.
	ErrInvalidRequest = errors.New("llm: invalid request")
	// ErrMisbehaved: the model's reply was unusable (invalid JSON, schema
	// violation, bad tool call, cut off at the token limit) even after one
	// repair attempt. Transient: retry a bounded number of times.
	ErrMisbehaved = errors.New("llm: model misbehaved")
	// ErrBudgetExhausted: the project's daily token budget is spent. The
	// error is a *BudgetError carrying the time the budget resets.
	ErrBudgetExhausted = errors.New("llm: token budget exhausted")
	// ErrInvalidArguments: a tool call's arguments do not fit the tool's
	// parameters. Returned by Tool.Decode; the message names the field, and
	// is meant to be handed back to the model as the tool result.
	ErrInvalidArguments = errors.New("llm: invalid tool arguments")
)

// MisbehavedRetries is how many times a runtime should retry work that
// failed with ErrMisbehaved (each try already includes one repair attempt)
// before giving up on it as permanent.
const MisbehavedRetries = 3

// BudgetError says a project's daily token budget is spent until Until.
type BudgetError struct {
	Project string
	Limit   int64
	Spent   int64
	Until   time.Time
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("llm: token budget of project %q exhausted (%d of %d tokens today) until %s",
		e.Project, e.Spent, e.Limit, e.Until.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrBudgetExhausted) true.
func (e *BudgetError) Is(target error) bool { return target == ErrBudgetExhausted }

// Class is the coarse kind of an error, for a runtime deciding between ack,
// delay and dead-letter.
type Class int

// Error classes.
const (
	ClassNone      Class = iota // no error
	ClassTransient              // retry later (unavailable, misbehaved, budget, model missing)
	ClassPermanent              // will never succeed (invalid request)
	ClassCanceled               // the caller's context ended
)

func (c Class) String() string {
	switch c {
	case ClassNone:
		return "none"
	case ClassTransient:
		return "transient"
	case ClassPermanent:
		return "permanent"
	case ClassCanceled:
		return "canceled"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// Classify tells how a runtime should treat an error from this package. A
// missing model is transient: the worker waits until it is pulled, and the
// work waits with it.
func Classify(err error) Class {
	switch {
	case err == nil:
		return ClassNone
	case errors.Is(err, ErrInvalidRequest), errors.Is(err, ErrInvalidArguments):
		return ClassPermanent
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrMisbehaved),
		errors.Is(err, ErrBudgetExhausted), errors.Is(err, ErrModelMissing):
		return ClassTransient
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ClassCanceled
	}
	return ClassTransient
}

// permanent500 lists the messages of the 500s Ollama returns for requests it
// will never accept (seen on a real Ollama 0.17 server).
var permanent500 = []string{
	"invalid JSON schema in format",
	"invalid format:",
	"must be of type",
	"must be of an array of strings",
	"unknown type loading config params",
	"does not support",
}

// classify turns an error from the Ollama client into one wrapping our
// sentinels. model is the model the call used; host is for messages.
// parent is the caller's context (not the per-call timeout context).
func classify(parent context.Context, err error, op, model, host string) error {
	if err == nil {
		return nil
	}
	if model != "" {
		op += " " + model // "chat llama3", or just "version"
	}
	if perr := parent.Err(); perr != nil {
		return fmt.Errorf("llm: %s: %w", op, perr)
	}
	var se api.StatusError
	if errors.As(err, &se) {
		msg := se.ErrorMessage
		if msg == "" {
			msg = se.Status
		}
		switch {
		case contextExceeded(msg):
			return &contextError{msg: fmt.Sprintf("llm: %s: HTTP %d: %s", op, se.StatusCode, msg)}
		case se.StatusCode == http.StatusNotFound:
			return missingModel(model, host, msg)
		case se.StatusCode == http.StatusRequestTimeout, se.StatusCode == http.StatusTooManyRequests, se.StatusCode == 499:
			return fmt.Errorf("%w: %s: HTTP %d: %s", ErrUnavailable, op, se.StatusCode, msg)
		case se.StatusCode >= 500 && isPermanentMessage(msg):
			return fmt.Errorf("%w: %s: HTTP %d: %s", ErrInvalidRequest, op, se.StatusCode, msg)
		case se.StatusCode >= 500:
			return fmt.Errorf("%w: %s: HTTP %d: %s", ErrUnavailable, op, se.StatusCode, msg)
		case se.StatusCode >= 400:
			return fmt.Errorf("%w: %s: HTTP %d: %s", ErrInvalidRequest, op, se.StatusCode, msg)
		}
	}
	var ae api.AuthorizationError
	if errors.As(err, &ae) {
		return fmt.Errorf("%w: %s: unauthorized: %v", ErrInvalidRequest, op, ae)
	}
	var ne net.Error
	var ue *url.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %s: timed out: %v", ErrUnavailable, op, err)
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.As(err, &ne), errors.As(err, &ue):
		return fmt.Errorf("%w: %s at %s: %v", ErrUnavailable, op, host, err)
	}
	// The client turns a non-JSON body or an in-band {"error": ...} line into
	// a plain error. Permanent messages stay permanent; the rest is a server
	// or proxy problem, transient.
	if contextExceeded(err.Error()) {
		return &contextError{msg: fmt.Sprintf("llm: %s: %v", op, err)}
	}
	if isPermanentMessage(err.Error()) {
		return fmt.Errorf("%w: %s: %v", ErrInvalidRequest, op, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrUnavailable, op, err)
}

func isPermanentMessage(msg string) bool {
	for _, p := range permanent500 {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func missingModel(model, host, msg string) error {
	return fmt.Errorf("%w: model %q is not installed in the Ollama server at %s (%s); run `ollama pull %s`",
		ErrModelMissing, model, host, msg, model)
}
