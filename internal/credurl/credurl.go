package credurl

import (
	"encoding/json"
	"fmt"
	"strings"

	"go.uber.org/zap/zapcore"
)

// Mask replaces the secret part of a URL's user information (as net/url's
// URL.Redacted writes it).
const Mask = "xxxxx"

// Redact returns s with the user information of every URL in it masked:
// the password of user:password@ (the user name is kept), or the whole of
// a user information without a password (a token); and the values of the
// URL's query parameters whose names say they hold a credential (api_key,
// token, password, X-Amz-Signature, ...: SecretParam) masked too. Text
// without "://" is returned as is.
func Redact(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	var b strings.Builder
	last, i := 0, 0
	mask := func(from, to int) {
		b.WriteString(s[last:from])
		b.WriteString(Mask)
		last = to
	}
	for {
		k := strings.Index(s[i:], "://")
		if k < 0 {
			break
		}
		k += i
		start := k + 3
		i = start
		if schemeStart(s, k) == k {
			continue // "://" without a scheme before it
		}
		end := authorityEnd(s, start)
		rest := start
		if at := strings.LastIndexByte(s[start:end], '@'); at >= 0 {
			at += start
			user := s[start:at]
			from := start
			if c := strings.IndexByte(user, ':'); c >= 0 {
				from = start + c + 1
			}
			mask(from, at)
			rest = at
		}
		for _, v := range secretValues(s, rest, end) {
			mask(v[0], v[1])
		}
		i = max(i, last)
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// secretValues returns the spans of the values of the query parameters of
// s[from:end] (a URL's host, path and query) whose names are SecretParam.
// A value ends at '&', '#', whitespace, a quote, a backslash (an escaped
// quote of JSON) or an angle bracket; punctuation that ends a sentence or
// an error's prefix ("...?key=v: dial tcp") is left out of it.
func secretValues(s string, from, end int) [][2]int {
	q := strings.IndexByte(s[from:end], '?')
	if q < 0 {
		return nil
	}
	var out [][2]int
	for p := from + q + 1; p < end; {
		n := p
		for n < end && !strings.ContainsRune("=&#", rune(s[n])) && !valueEnd(s[n]) {
			n++
		}
		if n >= end || s[n] != '=' {
			if n < end && s[n] == '&' {
				p = n + 1
				continue
			}
			break
		}
		v := n + 1
		e := v
		for e < end && s[e] != '&' && s[e] != '#' && !valueEnd(s[e]) {
			e++
		}
		stop := e
		for stop > v && strings.ContainsRune(":,.;)", rune(s[stop-1])) {
			stop--
		}
		if stop > v && SecretParam(s[p:n]) {
			out = append(out, [2]int{v, stop})
		}
		if e >= end || s[e] != '&' {
			break
		}
		p = e + 1
	}
	return out
}

func valueEnd(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\f', '\v', '"', '\'', '\\', '<', '>', '`':
		return true
	}
	return false
}

// SecretParam reports whether a URL query parameter's name says its value
// is a credential: it holds key, token, secret, passw, pwd, signature,
// credential or auth (case-insensitively; "sig" alone too).
func SecretParam(name string) bool {
	n := strings.ToLower(name)
	if n == "sig" || n == "pass" || n == "pw" {
		return true
	}
	for _, w := range []string{"key", "token", "secret", "passw", "pwd", "signature", "credential", "auth"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// schemeStart is where the scheme ending at k ("://" at k) begins: letters,
// digits, '+', '-', '.' starting with a letter; k when there is none.
func schemeStart(s string, k int) int {
	j := k
	for j > 0 && schemeChar(s[j-1]) {
		j--
	}
	for j < k && !letter(s[j]) {
		j++ // "1nats://": the scheme starts at its first letter
	}
	return j
}

func letter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func schemeChar(c byte) bool {
	return letter(c) || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

// authorityEnd is where the user information and host starting at start
// can end at the latest: whitespace, a quote (not escaped), an angle
// bracket or backtick, or the scheme of the next URL of a list.
func authorityEnd(s string, start int) int {
	end := len(s)
	for j := start; j < len(s); j++ {
		switch c := s[j]; c {
		case ' ', '\t', '\n', '\r', '\f', '\v', '\'', '<', '>', '`':
			end = j
		case '"':
			if j > start && s[j-1] == '\\' {
				continue // an escaped quote inside a quoted password
			}
			end = j
		default:
			continue
		}
		break
	}
	if n := strings.Index(s[start:end], "://"); n >= 0 {
		if m := schemeStart(s, start+n); m < start+n {
			end = m
		}
	}
	return end
}

// redactedError is an error whose message was redacted; it unwraps to the
// original (errors.Is and errors.As still work).
type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// Error returns err with its message redacted (nil for nil; err itself
// when its message holds no URL credentials). errors.Is and errors.As see
// through it; the original's message is then the caller's to redact.
func Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	r := Redact(msg)
	if r == msg {
		return err
	}
	return &redactedError{err: err, msg: r}
}

// Core wraps c so that the message and the string, error, stringer and
// byte-string fields of every entry (and the fields added with With) are
// redacted before they are encoded.
func Core(c zapcore.Core) zapcore.Core { return &core{Core: c} }

type core struct{ zapcore.Core }

func (c *core) With(fs []zapcore.Field) zapcore.Core {
	return &core{Core: c.Core.With(redactFields(fs))}
}

func (c *core) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}

func (c *core) Write(ent zapcore.Entry, fs []zapcore.Field) error {
	ent.Message = Redact(ent.Message)
	return c.Core.Write(ent, redactFields(fs))
}

// redactFields returns fs, or a copy with the fields that hold URL
// credentials redacted.
func redactFields(fs []zapcore.Field) []zapcore.Field {
	var out []zapcore.Field
	for i, f := range fs {
		g, changed := redactField(f)
		if !changed {
			continue
		}
		if out == nil {
			out = append([]zapcore.Field(nil), fs...)
		}
		out[i] = g
	}
	if out == nil {
		return fs
	}
	return out
}

func redactField(f zapcore.Field) (zapcore.Field, bool) {
	switch f.Type {
	case zapcore.StringType:
		if r := Redact(f.String); r != f.String {
			f.String = r
			return f, true
		}
	case zapcore.ByteStringType:
		if b, ok := f.Interface.([]byte); ok {
			if r := Redact(string(b)); r != string(b) {
				return zapcore.Field{Key: f.Key, Type: zapcore.StringType, String: r}, true
			}
		}
	case zapcore.ErrorType:
		if err, ok := f.Interface.(error); ok && err != nil {
			if r := Error(err); r != err {
				f.Interface = r
				return f, true
			}
		}
	case zapcore.StringerType:
		if st, ok := f.Interface.(fmt.Stringer); ok {
			if s, ok := stringOf(st); ok {
				if r := Redact(s); r != s {
					return zapcore.Field{Key: f.Key, Type: zapcore.StringType, String: r}, true
				}
			}
		}
	case zapcore.ArrayMarshalerType, zapcore.ObjectMarshalerType, zapcore.ReflectType:
		// zap.Strings, zap.Object, zap.Any of a struct, zap.Errors: their
		// JSON form, redacted, when it holds a URL with user information
		if s, ok := jsonOf(f); ok && strings.Contains(s, "://") {
			if r := Redact(s); r != s {
				return zapcore.Field{Key: f.Key, Type: zapcore.StringType, String: r}, true
			}
		}
	}
	return f, false
}

// jsonOf is a field's value as zap's JSON encoder would write it.
func jsonOf(f zapcore.Field) (s string, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	enc := zapcore.NewMapObjectEncoder()
	f.AddTo(enc)
	b, err := json.Marshal(enc.Fields[f.Key])
	if err != nil {
		return fmt.Sprint(enc.Fields[f.Key]), true
	}
	return string(b), true
}

// stringOf calls String, which may panic on a nil receiver (zap reports
// that itself: leave the field as it is).
func stringOf(st fmt.Stringer) (s string, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return st.String(), true
}
