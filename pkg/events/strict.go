package events

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Time bounds of an event's timestamps (occurred_at, reply_by,
// last_activity): nothing Engram handles happened before EarliestTime,
// and a clock more than MaxClockAhead ahead of the reader's is a broken
// clock or a forged value, which would otherwise sort first or never
// expire (years 0001 and 9999 both decode as valid times).
var EarliestTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// MaxClockAhead is how far in the future of the reader's clock a timestamp
// may be.
const MaxClockAhead = 24 * time.Hour

// time adds a problem when t is set and outside the sane range.
func (p *problems) time(field string, t time.Time) {
	if t.IsZero() {
		return
	}
	switch {
	case t.Before(EarliestTime):
		p.add(field, fmt.Sprintf("%s is before %s", t.UTC().Format(time.RFC3339), EarliestTime.Format(time.DateOnly)))
	case t.After(time.Now().Add(MaxClockAhead)):
		p.add(field, fmt.Sprintf("%s is more than %s ahead of this reader's clock", t.UTC().Format(time.RFC3339), MaxClockAhead))
	}
}

// controlAt returns the byte offset of the first control character (Unicode
// Cc: U+0000-U+001F, U+007F-U+009F) in s, or -1. Ids name files, keys and
// log lines: a NUL or a newline in one cuts or forges them.
func controlAt(s string) int {
	for i, r := range s {
		if unicode.IsControl(r) {
			return i
		}
	}
	return -1
}

// knownFields are the JSON names of every field of the envelope and its
// payloads, folded as encoding/json folds names (it matches a struct's
// field names case-insensitively).
var knownFields = func() map[string]string {
	m := map[string]string{}
	var walk func(t reflect.Type)
	seen := map[reflect.Type]bool{}
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] || t == reflect.TypeFor[time.Time]() {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous {
				walk(f.Type)
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			m[foldName(name)] = name
			walk(f.Type)
		}
	}
	walk(reflect.TypeFor[Envelope]())
	for _, p := range []Payload{TurnStarted{}, TurnEnded{}, SessionIdle{}, TokensReported{},
		InjectionReady{}, MemoryChanged{}, ConsolidationDone{}, CompactionDone{}} {
		walk(reflect.TypeOf(p))
	}
	return m
}()

// foldName folds a JSON name as encoding/json does when it matches struct
// fields.
func foldName(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			b.WriteRune(r)
			continue
		}
		b.WriteRune(unicode.ToUpper(unicode.ToLower(r)))
	}
	return b.String()
}

// mapFields are the objects whose keys are data (a Go map), not field
// names: only exact duplicates are refused in them.
var mapFields = map[string]bool{"project_names": true}

// CheckKeys is Decode's check of an event's keys (see checkKeys), for a
// tool that reads an event's JSON into a map before decoding it (a map
// keeps only the last of two equal keys).
func CheckKeys(data []byte) error { return checkKeys(data) }

// checkKeys refuses, in valid JSON, a key that appears twice in one object
// (a first-wins reader, such as a gateway in another language, and this
// last-wins one would see two different events: another tenant, another
// reply_to), and a key that encoding/json would take for a field of
// another spelling ("TENANT_ID", "tenant_\u0069d" decoded, "Tenant_Id"):
// a case-sensitive reader would not see it at all. Both are compared after
// unescaping. Keys of map objects (payload.project_names) are data and only
// their exact duplicates are refused. The error names the key's path.
func checkKeys(data []byte) error {
	type frame struct {
		path   string
		isObj  bool
		isMap  bool
		idx    int
		keys   map[string]bool
		key    string // the current key
		expect bool   // an object expecting a key
	}
	var stack []frame
	child := func() string {
		if len(stack) == 0 {
			return ""
		}
		f := &stack[len(stack)-1]
		switch {
		case f.isObj && f.path == "":
			return f.key
		case f.isObj:
			return f.path + "." + f.key
		}
		return f.path + "[" + strconv.Itoa(f.idx) + "]"
	}
	valueDone := func() {
		if len(stack) == 0 {
			return
		}
		f := &stack[len(stack)-1]
		if f.isObj {
			f.expect = true
		} else {
			f.idx++
		}
	}
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch c {
		case '{', '[':
			path := child()
			isMap := false
			if len(stack) > 0 && stack[len(stack)-1].isObj {
				isMap = mapFields[stack[len(stack)-1].key]
			}
			stack = append(stack, frame{path: path, isObj: c == '{', isMap: isMap, expect: c == '{'})
		case '}', ']':
			if len(stack) == 0 {
				return nil // not valid JSON: the decoder reports it
			}
			stack = stack[:len(stack)-1]
			valueDone()
		case '"':
			j := i + 1
			esc := false
			for ; j < len(data); j++ {
				if data[j] == '\\' {
					esc = true
					j++
					continue
				}
				if data[j] == '"' {
					break
				}
			}
			if j >= len(data) {
				return nil
			}
			raw, quoted := data[i+1:j], data[i:j+1]
			i = j
			if len(stack) == 0 {
				continue
			}
			f := &stack[len(stack)-1]
			if !f.isObj || !f.expect {
				valueDone()
				continue
			}
			key := string(raw)
			if esc {
				if err := json.Unmarshal(quoted, &key); err != nil {
					return nil // the decoder reports a bad escape
				}
			}
			f.expect = false
			f.key = key
			where := key
			if f.path != "" {
				where = f.path + "." + key
			}
			id := key
			if !f.isMap {
				id = foldName(key)
				if name, ok := knownFields[id]; ok && name != key {
					return &FieldError{Field: where, Reason: fmt.Sprintf("spelled otherwise than the field %q (names are case-sensitive here)", name)}
				}
			}
			if f.keys == nil {
				f.keys = map[string]bool{}
			}
			if f.keys[id] {
				return &FieldError{Field: where, Reason: "duplicate key (an object names each key once)"}
			}
			f.keys[id] = true
		case ',', ':', ' ', '\t', '\r', '\n':
		default:
			// A number, true, false or null: skip to its end.
			for i+1 < len(data) && !strings.ContainsRune(",}] \t\r\n", rune(data[i+1])) {
				i++
			}
			valueDone()
		}
	}
	return nil
}
