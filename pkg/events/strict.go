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
	// The keys of the open objects, folded, in one arena: a frame's keys
	// are the spans from its first on (a stack: a closed object's keys
	// are dropped), so that a decode allocates a few slices, not a map and
	// a string per key.
	var (
		buf   [8]keyFrame
		stack = buf[:0]
		abuf  [256]byte
		arena = abuf[:0]
		sbuf  [32][2]int
		spans = sbuf[:0]
	)
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch c {
		case '{', '[':
			isMap := false
			if n := len(stack); n > 0 && stack[n-1].isObj {
				isMap = mapFields[string(stack[n-1].key)]
			}
			stack = append(stack, keyFrame{isObj: c == '{', isMap: isMap, expect: c == '{', first: len(spans)})
		case '}', ']':
			if len(stack) == 0 {
				return nil // not valid JSON: the decoder reports it
			}
			if f := stack[len(stack)-1]; f.first < len(spans) {
				arena = arena[:spans[f.first][0]]
				spans = spans[:f.first]
			}
			stack = stack[:len(stack)-1]
			valueDone(stack)
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
				valueDone(stack)
				continue
			}
			f.expect = false
			key := raw
			if esc {
				var k string
				if err := json.Unmarshal(quoted, &k); err != nil {
					return nil // the decoder reports a bad escape
				}
				key = []byte(k)
			}
			// The key as this object compares it: folded as encoding/json
			// folds field names, except in a map (data, compared exactly).
			start := len(arena)
			if f.isMap {
				arena = append(arena, key...)
			} else {
				arena = appendFolded(arena, key)
			}
			id := arena[start:]
			if !f.isMap {
				if name, ok := knownFields[string(id)]; ok && name != string(key) {
					return &FieldError{Field: keyPath(stack, key), Reason: fmt.Sprintf("spelled otherwise than the field %q (names are case-sensitive here)", name)}
				}
			}
			dup := false
			if f.many != nil {
				dup = f.many[string(id)]
				f.many[string(id)] = true
			} else {
				for _, sp := range spans[f.first:] {
					if string(arena[sp[0]:sp[1]]) == string(id) {
						dup = true
						break
					}
				}
				if len(spans)-f.first >= 32 {
					// A large object (a map): a set from here on.
					f.many = make(map[string]bool, 64)
					for _, sp := range spans[f.first:] {
						f.many[string(arena[sp[0]:sp[1]])] = true
					}
					f.many[string(id)] = true
				}
			}
			if dup {
				return &FieldError{Field: keyPath(stack, key), Reason: "duplicate key (an object names each key once)"}
			}
			f.key = key
			spans = append(spans, [2]int{start, len(arena)})
		case ',', ':', ' ', '\t', '\r', '\n':
		default:
			// A number, true, false or null: skip to its end.
			for i+1 < len(data) && !strings.ContainsRune(",}] \t\r\n", rune(data[i+1])) {
				i++
			}
			valueDone(stack)
		}
	}
	return nil
}

// keyFrame is an open object or array of checkKeys.
type keyFrame struct {
	isObj  bool
	isMap  bool
	expect bool   // an object expecting a key
	idx    int    // an array's current index
	key    []byte // an object's current key
	first  int    // its keys: spans[first:]
	many   map[string]bool
}

// valueDone records that the innermost container's current value ended.
func valueDone(stack []keyFrame) {
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

// keyPath is the JSON path of key in the innermost object of stack, e.g.
// "payload.messages[1].content".
func keyPath(stack []keyFrame, key []byte) string {
	var b strings.Builder
	for _, f := range stack[:len(stack)-1] {
		switch {
		case !f.isObj:
			b.WriteString("[" + strconv.Itoa(f.idx) + "]")
		case b.Len() > 0:
			b.WriteString("." + string(f.key))
		default:
			b.Write(f.key)
		}
	}
	if b.Len() > 0 {
		b.WriteByte('.')
	}
	b.Write(key)
	return b.String()
}

// appendFolded appends name folded as encoding/json folds field names
// (foldName) to b.
func appendFolded(b, name []byte) []byte {
	for i := 0; i < len(name); {
		c := name[i]
		if c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			b = append(b, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(name[i:])
		b = utf8.AppendRune(b, unicode.ToUpper(unicode.ToLower(r)))
		i += n
	}
	return b
}
