package events

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// SchemaVersion is the envelope schema version this package writes and the
// newest it reads. Additive changes (new optional fields, new event types)
// keep the version; a breaking change bumps it.
const SchemaVersion = 1

// MaxIDLen bounds project, session, turn and event ids (bytes), which keeps
// subjects (ids are encoded into them) well under the protocol limits.
const MaxIDLen = 256

// ErrInvalidEvent is wrapped by every error Decode and Validate return.
// A *FieldError (found with errors.As) names the offending field.
var ErrInvalidEvent = errors.New("events: invalid event")

// FieldError says which field of an event is wrong and why. It wraps
// ErrInvalidEvent.
type FieldError struct {
	Field  string // JSON path, e.g. "project_id" or "payload.messages[1].role"
	Reason string // e.g. "missing"
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("events: invalid event: %s: %s", e.Field, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidEvent) hold.
func (e *FieldError) Unwrap() error { return ErrInvalidEvent }

// Type is an event type. It is also a subject token.
type Type string

// Input event types (published by chat platforms into ENGRAM_IN).
const (
	TypeTurnStarted    Type = "turn_started"
	TypeTurnEnded      Type = "turn_ended"
	TypeSessionIdle    Type = "session_idle"
	TypeTokensReported Type = "tokens_reported"
)

// Output event types (published by workers into ENGRAM_OUT).
const (
	TypeInjectionReady    Type = "injection_ready"
	TypeMemoryChanged     Type = "memory_changed"
	TypeConsolidationDone Type = "consolidation_done"
	TypeCompactionDone    Type = "compaction_done"
)

// InputTypes lists the input types in a stable order.
var InputTypes = []Type{TypeTurnStarted, TypeTurnEnded, TypeSessionIdle, TypeTokensReported}

// OutputTypes lists the output types in a stable order.
var OutputTypes = []Type{TypeInjectionReady, TypeMemoryChanged, TypeConsolidationDone, TypeCompactionDone}

// IsInput reports whether t is one of the input types.
func (t Type) IsInput() bool {
	switch t {
	case TypeTurnStarted, TypeTurnEnded, TypeSessionIdle, TypeTokensReported:
		return true
	}
	return false
}

// IsOutput reports whether t is one of the output types.
func (t Type) IsOutput() bool {
	switch t {
	case TypeInjectionReady, TypeMemoryChanged, TypeConsolidationDone, TypeCompactionDone:
		return true
	}
	return false
}

// Valid reports whether t is a known type.
func (t Type) Valid() bool { return t.IsInput() || t.IsOutput() }

// needsSession: every type but memory_changed belongs to a session.
func (t Type) needsSession() bool { return t != TypeMemoryChanged }

// needsTurn: the turn events and the injection reply carry a turn id.
func (t Type) needsTurn() bool {
	return t == TypeTurnStarted || t == TypeTurnEnded || t == TypeInjectionReady
}

// Payload is the typed body of an event: one of TurnStarted, TurnEnded,
// SessionIdle, TokensReported, InjectionReady, MemoryChanged,
// ConsolidationDone, CompactionDone (values, not pointers).
type Payload interface {
	EventType() Type
	validate(p *problems)
}

// Ref names where an event belongs: a tenant (optional: "" is the default
// tenant), a project, a session and, for turn events, a turn. Ids are
// opaque strings of any characters (at most MaxIDLen bytes, valid UTF-8).
// A project belongs to its tenant: project "p" of tenant "a" and project
// "p" of tenant "b" share nothing.
type Ref struct {
	TenantID  string
	ProjectID string
	SessionID string
	TurnID    string
}

// Envelope is one event as it travels on the bus (JSON):
//
//	{"id":"01J...","type":"turn_started","version":1,"occurred_at":"2026-...Z",
//	 "tenant_id":"acme","project_id":"p","session_id":"s","turn_id":"t1","payload":{...}}
//
// TenantID is optional: without it the event is the default tenant's, as
// every event was before tenants existed. A platform that serves several
// customers (tenants) from one Engram sets it on every event; the workers
// carry it into every record they write and every reply they publish, and
// nothing of one tenant (its global memories included) is ever read for
// another.
//
// Payload holds the typed payload after Decode; its dynamic type matches Type.
type Envelope struct {
	ID         string    `json:"id"`
	Type       Type      `json:"type"`
	Version    int       `json:"version"`
	OccurredAt time.Time `json:"occurred_at"`
	TenantID   string    `json:"tenant_id,omitempty"`
	ProjectID  string    `json:"project_id"`
	SessionID  string    `json:"session_id,omitempty"`
	TurnID     string    `json:"turn_id,omitempty"`
	Payload    Payload   `json:"payload"`
}

// New builds an event of p's type for ref with a fresh unique id, the current
// schema version and occurred-at now (UTC).
func New(ref Ref, p Payload) Envelope {
	return Envelope{
		ID:         NewID(),
		Type:       p.EventType(),
		Version:    SchemaVersion,
		OccurredAt: time.Now().UTC(),
		TenantID:   ref.TenantID,
		ProjectID:  ref.ProjectID,
		SessionID:  ref.SessionID,
		TurnID:     ref.TurnID,
		Payload:    p,
	}
}

// NewTurnStarted builds a turn_started event (see New).
func NewTurnStarted(ref Ref, p TurnStarted) Envelope { return New(ref, p) }

// NewTurnEnded builds a turn_ended event (see New).
func NewTurnEnded(ref Ref, p TurnEnded) Envelope { return New(ref, p) }

// NewSessionIdle builds a session_idle event (see New).
func NewSessionIdle(ref Ref, p SessionIdle) Envelope { return New(ref, p) }

// NewTokensReported builds a tokens_reported event (see New).
func NewTokensReported(ref Ref, p TokensReported) Envelope { return New(ref, p) }

// Ref returns the event's tenant, project, session and turn.
func (e Envelope) Ref() Ref {
	return Ref{TenantID: e.TenantID, ProjectID: e.ProjectID, SessionID: e.SessionID, TurnID: e.TurnID}
}

// PayloadAs returns the event's payload as T, or an error wrapping
// ErrInvalidEvent when the payload is of another type.
func PayloadAs[T Payload](e Envelope) (T, error) {
	p, ok := e.Payload.(T)
	if !ok {
		var zero T
		return zero, &FieldError{Field: "payload", Reason: fmt.Sprintf("is %T, want %T", e.Payload, zero)}
	}
	return p, nil
}

// Validate checks the envelope and its payload, reporting every problem
// (joined; each a *FieldError wrapping ErrInvalidEvent).
func (e Envelope) Validate() error {
	var p problems
	e.validateHead(&p)
	switch {
	case e.Payload == nil:
		p.add("payload", "missing")
	case e.Type.Valid() && e.Payload.EventType() != e.Type:
		p.add("payload", fmt.Sprintf("is a %s payload in a %s event", e.Payload.EventType(), e.Type))
	default:
		p.prefix = "payload."
		e.Payload.validate(&p)
	}
	return p.err()
}

func (e Envelope) validateHead(p *problems) {
	p.id("id", e.ID, true)
	switch {
	case e.Type == "":
		p.add("type", "missing")
	case !e.Type.Valid():
		p.add("type", fmt.Sprintf("unknown event type %q", string(e.Type)))
	}
	switch {
	case e.Version == 0:
		p.add("version", "missing")
	case e.Version < 0 || e.Version > SchemaVersion:
		p.add("version", fmt.Sprintf("unsupported schema version %d (this reader knows up to %d)", e.Version, SchemaVersion))
	}
	if e.OccurredAt.IsZero() {
		p.add("occurred_at", "missing")
	}
	p.time("occurred_at", e.OccurredAt)
	p.id("tenant_id", e.TenantID, false)
	p.id("project_id", e.ProjectID, true)
	p.id("session_id", e.SessionID, e.Type.Valid() && e.Type.needsSession())
	p.id("turn_id", e.TurnID, e.Type.needsTurn())
}

// Encode validates e and returns its JSON.
func Encode(e Envelope) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("events: encode %s: %w", e.Type, err)
	}
	return b, nil
}

// Decode parses and validates one event. Malformed JSON, an unknown type, a
// newer schema version or a missing or mistyped required field is an error
// wrapping ErrInvalidEvent that names the field. Unknown fields are ignored.
// It is strict where readers could disagree: a key twice in one object,
// a key that differs from a field's name only in case (checkKeys), a
// control character in an id, a timestamp before EarliestTime or more than
// MaxClockAhead ahead are refused.
//
// The raw bytes are checked before decoding: invalid UTF-8 or a lone
// UTF-16 surrogate escape (\ud800) anywhere in the body is an error, since
// the JSON decoder would turn both into U+FFFD and so make distinct ids
// (tenant-\xff, tenant-\xfe) one.
func Decode(data []byte) (Envelope, error) {
	if err := checkText(data); err != nil {
		return Envelope{}, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Envelope{}, fmt.Errorf("%w: malformed JSON: %w", ErrInvalidEvent, err)
	}
	if raw == nil {
		return Envelope{}, fmt.Errorf("%w: malformed JSON: not an object", ErrInvalidEvent)
	}
	if err := checkKeys(data); err != nil {
		return Envelope{}, err
	}
	var e Envelope
	var p problems
	// A field of the wrong JSON type is reported (by name) here; a missing
	// one by validateHead.
	field := func(name string, dst any) {
		r, ok := raw[name]
		if !ok || bytes.Equal(bytes.TrimSpace(r), []byte("null")) {
			return
		}
		if err := json.Unmarshal(r, dst); err != nil {
			p.add(name, "malformed: "+err.Error())
		}
	}
	field("id", &e.ID)
	field("type", &e.Type)
	field("version", &e.Version)
	field("occurred_at", &e.OccurredAt)
	field("tenant_id", &e.TenantID)
	field("project_id", &e.ProjectID)
	field("session_id", &e.SessionID)
	field("turn_id", &e.TurnID)
	malformed := len(p.errs) > 0

	e.validateHead(&p)
	payload := bytes.TrimSpace(raw["payload"])
	switch {
	case len(payload) == 0 || bytes.Equal(payload, []byte("null")):
		p.add("payload", "missing")
	case payload[0] != '{':
		p.add("payload", "not a JSON object")
	case e.Type.Valid():
		pl, err := decodePayload(e.Type, payload)
		if err != nil {
			p.add("payload", err.Error())
			break
		}
		e.Payload = pl
		p.prefix = "payload."
		pl.validate(&p)
	}
	if err := p.err(); err != nil {
		if malformed {
			// Keep "missing" out of the report for a field that was present
			// but mistyped.
			p.errs = dedupeFields(p.errs)
			err = p.err()
		}
		return Envelope{}, err
	}
	return e, nil
}

// checkText rejects bytes the JSON decoder would silently replace with
// U+FFFD: invalid UTF-8, and \u escapes of a lone surrogate.
func checkText(data []byte) error {
	if !utf8.Valid(data) {
		i := 0
		for i < len(data) {
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return fmt.Errorf("%w: not valid UTF-8 (byte %d is 0x%02x)", ErrInvalidEvent, i, data[i])
	}
	if !bytes.Contains(data, []byte(`\u`)) {
		return nil
	}
	in := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if !in {
			if c == '"' {
				in = true
			}
			continue
		}
		switch c {
		case '"':
			in = false
		case '\\':
			if i+1 < len(data) && data[i+1] == 'u' {
				r, ok := hex4(data, i+2)
				switch {
				case ok && r >= 0xD800 && r <= 0xDBFF:
					lo, ok2 := rune(0), false
					if i+7 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
						lo, ok2 = hex4(data, i+8)
					}
					if !ok2 || lo < 0xDC00 || lo > 0xDFFF {
						return fmt.Errorf("%w: lone UTF-16 surrogate escape at byte %d", ErrInvalidEvent, i)
					}
					i += 11
					continue
				case ok && r >= 0xDC00 && r <= 0xDFFF:
					return fmt.Errorf("%w: lone UTF-16 surrogate escape at byte %d", ErrInvalidEvent, i)
				}
			}
			i++ // skip the escaped byte
		}
	}
	return nil
}

// hex4 reads four hex digits at data[i:].
func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

// dedupeFields keeps the first error of each field.
func dedupeFields(errs []error) []error {
	seen := map[string]bool{}
	out := errs[:0]
	for _, err := range errs {
		var fe *FieldError
		if errors.As(err, &fe) {
			if seen[fe.Field] {
				continue
			}
			seen[fe.Field] = true
		}
		out = append(out, err)
	}
	return out
}

// UnmarshalJSON decodes and validates like Decode.
func (e *Envelope) UnmarshalJSON(data []byte) error {
	d, err := Decode(data)
	if err != nil {
		return err
	}
	*e = d
	return nil
}

func decodePayload(t Type, raw []byte) (Payload, error) {
	switch t {
	case TypeTurnStarted:
		return unmarshal[TurnStarted](raw)
	case TypeTurnEnded:
		return unmarshal[TurnEnded](raw)
	case TypeSessionIdle:
		return unmarshal[SessionIdle](raw)
	case TypeTokensReported:
		return unmarshal[TokensReported](raw)
	case TypeInjectionReady:
		return unmarshal[InjectionReady](raw)
	case TypeMemoryChanged:
		return unmarshal[MemoryChanged](raw)
	case TypeConsolidationDone:
		return unmarshal[ConsolidationDone](raw)
	case TypeCompactionDone:
		return unmarshal[CompactionDone](raw)
	}
	return nil, fmt.Errorf("unknown event type %q", string(t))
}

func unmarshal[T Payload](raw []byte) (Payload, error) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("malformed: %w", err)
	}
	return v, nil
}

// problems collects field errors.
type problems struct {
	prefix string
	errs   []error
}

func (p *problems) add(field, reason string) {
	p.errs = append(p.errs, &FieldError{Field: p.prefix + field, Reason: reason})
}

func (p *problems) id(field, v string, required bool) {
	switch {
	case v == "":
		if required {
			p.add(field, "missing")
		}
	case len(v) > MaxIDLen:
		p.add(field, fmt.Sprintf("longer than %d bytes", MaxIDLen))
	case !utf8.ValidString(v):
		p.add(field, "not valid UTF-8")
	default:
		if i := controlAt(v); i >= 0 {
			p.add(field, fmt.Sprintf("holds a control character (%U at byte %d)", []rune(v[i:])[0], i))
		}
	}
}

func (p *problems) err() error {
	switch len(p.errs) {
	case 0:
		return nil
	case 1:
		return p.errs[0]
	}
	return errors.Join(p.errs...)
}

// NewID returns a unique, time-ordered event id: 26 characters of Crockford
// base32 (48 bits of milliseconds, 80 random bits), like a ULID.
func NewID() string {
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails (Go 1.24+)
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	var sb strings.Builder
	sb.Grow(26)
	// 128 bits -> 26 symbols of 5 bits (the first carries 3 bits).
	hi := uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
	lo := uint64(b[8])<<56 | uint64(b[9])<<48 | uint64(b[10])<<40 | uint64(b[11])<<32 |
		uint64(b[12])<<24 | uint64(b[13])<<16 | uint64(b[14])<<8 | uint64(b[15])
	for i := 0; i < 26; i++ {
		off := uint(5 * (25 - i))
		var v uint64
		switch {
		case off >= 64:
			v = hi >> (off - 64)
		case off+5 <= 64:
			v = lo >> off
		default:
			v = lo>>off | hi<<(64-off)
		}
		sb.WriteByte(alphabet[v&31])
	}
	return sb.String()
}
