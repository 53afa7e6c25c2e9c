package events

import (
	"errors"
	"fmt"
	"strings"
)

// DefaultPrefix is the first subject token(s) of every Engram subject.
const DefaultPrefix = "engram"

// ErrInvalidSubject is wrapped by the errors of subject and token parsing.
var ErrInvalidSubject = errors.New("events: invalid subject")

// Subjects builds and parses Engram subjects under a prefix:
//
//	<prefix>.in.<type>.<tenant>.<project>.<session>     input events (stream ENGRAM_IN)
//	<prefix>.out.<type>.<tenant>.<project>[.<session>]  output events (stream ENGRAM_OUT)
//	<prefix>.api.context.<tenant>.<project>.<session>   context requests (core NATS)
//	<prefix>.dlq.<consumer>                             dead letters (stream ENGRAM_DLQ)
//
// Tenant, project and session ids are encoded with EncodeToken; the default
// tenant (the empty id) is "%". The zero value uses DefaultPrefix.
type Subjects struct {
	Prefix string // one or more dot-separated tokens without wildcards; "" means DefaultPrefix
}

// ValidatePrefix reports whether prefix is usable as a subject prefix.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if !validSubject(prefix) {
		return fmt.Errorf("%w: prefix %q: want dot-separated tokens without spaces or wildcards", ErrInvalidSubject, prefix)
	}
	return nil
}

func (s Subjects) prefix() string {
	if s.Prefix == "" {
		return DefaultPrefix
	}
	return s.Prefix
}

// In is the subject of an input event of a tenant ("" the default tenant).
func (s Subjects) In(t Type, tenant, project, session string) string {
	return s.prefix() + ".in." + string(t) + "." + EncodeToken(tenant) + "." + EncodeToken(project) + "." + EncodeToken(session)
}

// Out is the subject of an output event; session may be empty.
func (s Subjects) Out(t Type, tenant, project, session string) string {
	subj := s.prefix() + ".out." + string(t) + "." + EncodeToken(tenant) + "." + EncodeToken(project)
	if session != "" {
		subj += "." + EncodeToken(session)
	}
	return subj
}

// For returns the subject an event is published on (input or output by type).
func (s Subjects) For(e Envelope) (string, error) {
	switch {
	case e.Type.IsInput():
		return s.In(e.Type, e.TenantID, e.ProjectID, e.SessionID), nil
	case e.Type.IsOutput():
		return s.Out(e.Type, e.TenantID, e.ProjectID, e.SessionID), nil
	}
	return "", &FieldError{Field: "type", Reason: fmt.Sprintf("unknown event type %q", string(e.Type))}
}

// InAll matches every input subject of every form, the older one without
// a tenant token included (ENGRAM_IN's subjects are InSubjects).
func (s Subjects) InAll() string { return s.prefix() + ".in.>" }

// InType matches the input subjects of one type, of both forms (a
// consumer's filter: an event stored before the tenant token existed is
// still delivered, and checked as the default tenant's).
func (s Subjects) InType(t Type) string { return s.prefix() + ".in." + string(t) + ".>" }

// InStream is the subject pattern ENGRAM_IN stores for one input type:
// <prefix>.in.<type>.*.*.* (tenant, project, session). A publish to any
// other subject (an unknown type, an output type, a token too few or too
// many) matches no stream and fails at the publisher.
func (s Subjects) InStream(t Type) string { return s.prefix() + ".in." + string(t) + ".*.*.*" }

// InStreams are ENGRAM_IN's subjects: InStream of every input type.
func (s Subjects) InStreams() []string {
	out := make([]string, 0, len(InputTypes))
	for _, t := range InputTypes {
		out = append(out, s.InStream(t))
	}
	return out
}

// InTenant matches the input subjects of one tenant (its platform's
// publish permission).
func (s Subjects) InTenant(tenant string) string {
	return s.prefix() + ".in.*." + EncodeToken(tenant) + ".>"
}

// OutAll matches every output subject (ENGRAM_OUT's subjects).
func (s Subjects) OutAll() string { return s.prefix() + ".out.>" }

// OutType matches the output subjects of one type, e.g. for a platform that
// watches memory_changed.
func (s Subjects) OutType(t Type) string { return s.prefix() + ".out." + string(t) + ".>" }

// OutTenant matches the output subjects of one type and tenant.
func (s Subjects) OutTenant(t Type, tenant string) string {
	return s.prefix() + ".out." + string(t) + "." + EncodeToken(tenant) + ".>"
}

// DLQ is the dead-letter subject of a consumer.
func (s Subjects) DLQ(consumer string) string { return s.prefix() + ".dlq." + EncodeToken(consumer) }

// DLQAll matches every dead-letter subject (ENGRAM_DLQ's subjects).
func (s Subjects) DLQAll() string { return s.prefix() + ".dlq.>" }

// Address is a parsed event subject.
type Address struct {
	Output    bool // false: input
	Type      Type
	TenantID  string
	ProjectID string
	SessionID string // may be empty for an output subject
	// Legacy: an input subject of the form before tenants
	// (<prefix>.in.<type>.<project>.<session>), still found in an
	// ENGRAM_IN written by an older version; its tenant is the default
	// one. New events are never published on it (ENGRAM_IN no longer
	// stores it).
	Legacy bool
}

// Parse reads an input or output subject back into its parts. An input
// subject of the older form without a tenant token parses with Legacy set
// and the default tenant.
func (s Subjects) Parse(subject string) (Address, error) {
	pre := s.prefix() + "."
	rest, ok := strings.CutPrefix(subject, pre)
	if !ok {
		return Address{}, fmt.Errorf("%w: %q does not start with %q", ErrInvalidSubject, subject, pre)
	}
	toks := strings.Split(rest, ".")
	bad := func(why string) (Address, error) {
		return Address{}, fmt.Errorf("%w: %q: %s", ErrInvalidSubject, subject, why)
	}
	if len(toks) < 4 {
		return bad("too few tokens")
	}
	var a Address
	ids := toks[2:]
	switch toks[0] {
	case "in":
		switch len(toks) {
		case 5:
		case 4:
			a.Legacy = true
			ids = append([]string{"%"}, ids...)
		default:
			return bad("an input subject has <type>.<tenant>.<project>.<session>")
		}
	case "out":
		if len(toks) != 4 && len(toks) != 5 {
			return bad("an output subject has <type>.<tenant>.<project>[.<session>]")
		}
		a.Output = true
	default:
		return bad("want in or out after the prefix")
	}
	a.Type = Type(toks[1])
	if (!a.Output && !a.Type.IsInput()) || (a.Output && !a.Type.IsOutput()) {
		return bad(fmt.Sprintf("unknown %s type %q", toks[0], toks[1]))
	}
	var err error
	if a.TenantID, err = DecodeToken(ids[0]); err != nil {
		return Address{}, err
	}
	if a.ProjectID, err = DecodeToken(ids[1]); err != nil {
		return Address{}, err
	}
	if len(ids) == 3 {
		if a.SessionID, err = DecodeToken(ids[2]); err != nil {
			return Address{}, err
		}
	}
	return a, nil
}

// Check reports whether subject is where e belongs: an input or output
// subject of s whose type, tenant, project and session tokens, decoded,
// are the body's. A platform may only publish where its permissions allow
// (a tenant's credentials reach only subjects with its tenant token), so
// the subject is what the bus vouches for, while the body is what the
// workers act on: an event on engram.in.turn_started.victim.p.s whose body
// names tenant other would otherwise be processed as other's. An input
// subject of the older form (no tenant token, Address.Legacy) vouches for
// the default tenant only. The error is a *FieldError (field "subject")
// wrapping ErrInvalidEvent, naming every mismatch.
func (s Subjects) Check(subject string, e Envelope) error {
	a, err := s.Parse(subject)
	if err != nil {
		return &FieldError{Field: "subject", Reason: err.Error()}
	}
	var why []string
	if a.Type != e.Type || a.Output != e.Type.IsOutput() {
		why = append(why, fmt.Sprintf("type %q, body %q", a.Type, e.Type))
	}
	if a.TenantID != e.TenantID {
		why = append(why, fmt.Sprintf("tenant %q, body %q", a.TenantID, e.TenantID))
	}
	if a.ProjectID != e.ProjectID {
		why = append(why, fmt.Sprintf("project %q, body %q", a.ProjectID, e.ProjectID))
	}
	if a.SessionID != e.SessionID {
		why = append(why, fmt.Sprintf("session %q, body %q", a.SessionID, e.SessionID))
	}
	if len(why) > 0 {
		return &FieldError{Field: "subject", Reason: fmt.Sprintf("%s does not match the body: subject %s", subject, strings.Join(why, "; subject "))}
	}
	return nil
}

// tokenSafe are the bytes a token keeps as they are.
func tokenSafe(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '_' || c == ':' || c == '@'
}

const upperHex = "0123456789ABCDEF"

// EncodeToken turns any string into one valid subject token, reversibly.
// Letters, digits and - _ : @ stay as they are (plain ids stay readable);
// every other byte becomes %XX (upper-case hex), so the result never holds
// '.', '*', '>' or whitespace. The empty string becomes "%".
func EncodeToken(s string) string {
	if s == "" {
		return "%"
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if !tokenSafe(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if tokenSafe(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&15])
	}
	return b.String()
}

// DecodeToken reverses EncodeToken. It accepts only canonical encodings
// (what EncodeToken produces), so encoding is a bijection.
func DecodeToken(tok string) (string, error) {
	if tok == "%" {
		return "", nil
	}
	if tok == "" {
		return "", fmt.Errorf("%w: empty token", ErrInvalidSubject)
	}
	if !strings.Contains(tok, "%") {
		for i := 0; i < len(tok); i++ {
			if !tokenSafe(tok[i]) {
				return "", fmt.Errorf("%w: token %q: byte %q must be escaped", ErrInvalidSubject, tok, tok[i])
			}
		}
		return tok, nil
	}
	b := make([]byte, 0, len(tok))
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if tokenSafe(c) {
			b = append(b, c)
			continue
		}
		if c != '%' || i+2 >= len(tok) {
			return "", fmt.Errorf("%w: token %q: bad escape at %d", ErrInvalidSubject, tok, i)
		}
		hi, lo := unhex(tok[i+1]), unhex(tok[i+2])
		if hi < 0 || lo < 0 {
			return "", fmt.Errorf("%w: token %q: bad escape at %d", ErrInvalidSubject, tok, i)
		}
		v := byte(hi<<4 | lo)
		if tokenSafe(v) {
			return "", fmt.Errorf("%w: token %q: %q must not be escaped", ErrInvalidSubject, tok, v)
		}
		b = append(b, v)
		i += 2
	}
	return string(b), nil
}

// unhex decodes one upper-case hex digit, -1 if it is not one.
func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// validSubject: dot-separated non-empty tokens, no whitespace, no wildcard
// tokens.
func validSubject(s string) bool {
	if s == "" || len(s) > 4096 {
		return false
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || tok == "*" || tok == ">" {
			return false
		}
		for i := 0; i < len(tok); i++ {
			switch tok[i] {
			case ' ', '\t', '\r', '\n', '\f', '\v', 0:
				return false
			}
		}
	}
	return true
}

// CurrentSubject returns the subject an input event of the form before
// tenants (<prefix>.in.<type>.<project>.<session>, Address.Legacy) is
// published on now, the default tenant's token inserted
// (<prefix>.in.<type>.%.<project>.<session>); any other subject is returned
// as it is. It needs no prefix: a tool that republishes stored events (a
// dead letter's replay) uses it so that an event dead-lettered before the
// tenant token existed can still be replayed (ENGRAM_IN no longer stores
// the older form). The worker then checks the body as the default
// tenant's.
func CurrentSubject(subject string) string {
	toks := strings.Split(subject, ".")
	n := len(toks)
	if n < 5 || toks[n-4] != "in" || !Type(toks[n-3]).IsInput() {
		return subject
	}
	// (A current subject has its type, never "in", 4th from the end.)
	for _, tok := range toks[n-2:] {
		if _, err := DecodeToken(tok); err != nil {
			return subject
		}
	}
	return strings.Join(toks[:n-2], ".") + ".%." + strings.Join(toks[n-2:], ".")
}
