package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Problem is one way a JSON value fails its schema. Path is like
// "items[2].label" ("" is the top level).
type Problem struct {
	Path    string
	Message string
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return fmt.Sprintf("field %q: %s", p.Path, p.Message)
}

// ValidationError lists every problem found (at most maxProblems).
type ValidationError struct {
	Problems []Problem
}

const maxProblems = 8

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return strings.Join(parts, "; ")
}

// Validate checks a JSON document against the schema. It returns nil or an
// error: a *ValidationError naming each wrong field, or a syntax error.
func (s *Schema) Validate(data []byte) error {
	v, err := decodeAny(data)
	if err != nil {
		return err
	}
	var probs []Problem
	s.validate(v, "", &probs)
	if len(probs) > 0 {
		return &ValidationError{Problems: probs}
	}
	return nil
}

// decodeAny decodes exactly one JSON value, keeping numbers exact.
func decodeAny(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty reply: expected a JSON object")
		}
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("not valid JSON: extra data after the JSON value")
	}
	return v, nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func (s *Schema) validate(v any, path string, probs *[]Problem) {
	add := func(format string, args ...any) {
		if len(*probs) < maxProblems {
			*probs = append(*probs, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
		}
	}
	switch s.Type {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			add("must be an object, got %s", jsonType(v))
			return
		}
		for _, r := range s.Required {
			if _, ok := m[r]; !ok {
				*probs = appendLimited(*probs, Problem{Path: join(path, r), Message: "is required but missing"})
			}
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			ps := s.Property(k)
			if ps == nil {
				*probs = appendLimited(*probs, Problem{Path: join(path, k), Message: "is not an allowed field"})
				continue
			}
			ps.validate(m[k], join(path, k), probs)
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			add("must be an array, got %s", jsonType(v))
			return
		}
		if s.MaxItems != nil && len(a) > *s.MaxItems {
			add("has %d items, at most %d allowed", len(a), *s.MaxItems)
		}
		if s.MinItems != nil && len(a) < *s.MinItems {
			add("has %d items, at least %d required", len(a), *s.MinItems)
		}
		if s.Items != nil {
			for i, e := range a {
				s.Items.validate(e, fmt.Sprintf("%s[%d]", path, i), probs)
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			add("must be a string, got %s", jsonType(v))
			return
		}
		n := utf8.RuneCountInString(str)
		if s.MaxLength != nil && n > *s.MaxLength {
			add("is %d characters long, at most %d allowed", n, *s.MaxLength)
		}
		if s.MinLength != nil && n < *s.MinLength {
			add("is %d characters long, at least %d required", n, *s.MinLength)
		}
		if len(s.Enum) > 0 && !slices.Contains(s.Enum, str) {
			add("is %q, must be one of %s", truncate(str, 40), strings.Join(quoteAll(s.Enum), ", "))
		}
	case "integer", "number":
		num, ok := v.(json.Number)
		if !ok {
			add("must be %s, got %s", article(s.Type), jsonType(v))
			return
		}
		f, err := strconv.ParseFloat(string(num), 64)
		if err != nil || math.IsInf(f, 0) {
			add("%s is out of range", num)
			return
		}
		if s.Type == "integer" {
			if _, err := strconv.ParseInt(string(num), 10, 64); err != nil {
				add("must be an integer, got %s", num)
				return
			}
		}
		if s.Minimum != nil && f < *s.Minimum {
			add("is %s, at least %g required", num, *s.Minimum)
		}
		if s.Maximum != nil && f > *s.Maximum {
			add("is %s, at most %g allowed", num, *s.Maximum)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			add("must be a boolean, got %s", jsonType(v))
		}
	}
}

func appendLimited(probs []Problem, p Problem) []Problem {
	if len(probs) < maxProblems {
		return append(probs, p)
	}
	return probs
}

func article(t string) string {
	if t == "integer" {
		return "an integer"
	}
	return "a " + t
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// Example returns a small JSON instance that satisfies the schema: enum
// strings take their first value, other strings "x" repeated to minLength,
// numbers the lower bound (or 0), arrays minItems elements, objects every
// property. Tests and the scripted server use it.
func (s *Schema) Example() json.RawMessage {
	b, _ := json.Marshal(s.example())
	return b
}

func (s *Schema) example() any {
	switch s.Type {
	case "object":
		m := make(map[string]any, len(s.Properties))
		for _, p := range s.Properties {
			m[p.Name] = p.Schema.example()
		}
		return m
	case "array":
		n := 0
		if s.MinItems != nil {
			n = *s.MinItems
		}
		a := make([]any, n)
		for i := range a {
			a[i] = s.Items.example()
		}
		return a
	case "string":
		if len(s.Enum) > 0 {
			return s.Enum[0]
		}
		n := 1
		if s.MinLength != nil {
			n = max(n, *s.MinLength)
		}
		if s.MaxLength != nil {
			n = min(n, *s.MaxLength)
		}
		return strings.Repeat("x", n)
	case "integer":
		switch {
		case s.Minimum != nil && *s.Minimum > 0:
			return int64(math.Ceil(*s.Minimum))
		case s.Maximum != nil && *s.Maximum < 0:
			return int64(math.Floor(*s.Maximum))
		}
		return 0
	case "number":
		switch {
		case s.Minimum != nil && *s.Minimum > 0:
			return *s.Minimum
		case s.Maximum != nil && *s.Maximum < 0:
			return *s.Maximum
		}
		return 0
	case "boolean":
		return false
	}
	return nil
}
