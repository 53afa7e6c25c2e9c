package erase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// MinText is the shortest text a verification looks for: a shorter one
// (a two-letter project id, a one-word label) is found by chance in any
// file, and would say nothing.
const MinText = 12

// Fragments: a text longer than fragmentMax is looked for in pieces of
// fragmentLen bytes (a long text may be split across two pages of a file
// or two values); each piece of it found is a finding.
const (
	fragmentMax = 48
	fragmentLen = 32
)

// maxFindings bounds the findings a receipt lists (the count is exact).
const maxFindings = 100

// Verification is what a verification looked for, where, and what it
// found. It never holds the texts themselves: only where a text of the
// scope was found and what kind of text it is.
type Verification struct {
	// Texts is how many texts of the scope (and pieces of long ones) were
	// looked for; TooShort how many were too short (MinText).
	Texts    int `json:"texts"`
	TooShort int `json:"too_short"`
	// Searched says what was read (files, keys, messages).
	Searched []string `json:"searched"`
	// Found lists where a text of the scope was found (at most 100):
	// left behind, or held by another scope too (Finding.KeptBy).
	Found []Finding `json:"found"`
	// FoundCount is the number of texts left behind; KeptCount of those
	// found where another scope keeps the same text (not the scope's).
	FoundCount int `json:"found_count"`
	KeptCount  int `json:"kept_count"`
}

// Finding is one place where a text of the scope was found.
type Finding struct {
	Where string `json:"where"`
	What  string `json:"what"` // the kind of text: "a text of the scope", "the session id", ...
	// KeptBy names the live records that hold the same text (another
	// scope's memory with the same words), when the store can tell.
	KeptBy string `json:"kept_by,omitempty"`
}

// texts collects the needles of a verification: the texts an erasure
// deleted (memory.Seen) and the scope's ids.
type texts struct {
	mu       sync.Mutex
	needles  map[string]string // fragment -> what
	tooShort int
}

func newTexts() *texts { return &texts{needles: map[string]string{}} }

// ids adds the scope's own ids.
func (t *texts) ids(sc Scope) {
	switch sc.Kind() {
	case "tenant":
		t.id("the tenant id", sc.Tenant)
	case "project":
		t.id("the project id", sc.Project)
	case "session":
		t.id("the session id", sc.Session)
	}
}

// id adds an id (looked for whole).
func (t *texts) id(what, id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(id) < MinText {
		t.tooShort++
		return
	}
	for _, v := range variants(id) {
		t.needles[v] = what
	}
}

// add adds a text an erasure deleted (a memory.Seen).
func (t *texts) add(text string) {
	if strings.TrimSpace(text) == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(text) < MinText {
		t.tooShort++
		return
	}
	for _, v := range variants(text) {
		for _, f := range fragments(v) {
			if _, ok := t.needles[f]; !ok {
				t.needles[f] = "a text of the scope"
			}
		}
	}
}

// variants are the forms a text is stored in: as it is, and escaped in
// JSON (with and without HTML escaping), as the stores and events write it.
func variants(s string) []string {
	out := []string{s}
	for _, html := range []bool{true, false} {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		if enc.Encode(s) == nil {
			v := strings.TrimSuffix(b.String(), "\n")
			v = v[1 : len(v)-1]
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out
}

// fragments cuts a long text into pieces (see fragmentMax).
func fragments(s string) []string {
	if len(s) <= fragmentMax {
		return []string{s}
	}
	var out []string
	for i := 0; i+fragmentLen <= len(s); i += fragmentLen {
		out = append(out, s[i:i+fragmentLen])
	}
	if len(s)%fragmentLen != 0 {
		out = append(out, s[len(s)-fragmentLen:])
	}
	return out
}

// matcher finds any of many needles in data in one pass (Rabin-Karp over
// the needles' first MinText bytes).
type matcher struct {
	needles []string
	what    []string
	byHash  map[uint64][]int
	pow     uint64
}

const rkBase = 1099511628211

func newMatcher(t *texts) *matcher {
	m := &matcher{byHash: map[uint64][]int{}, pow: 1}
	for i := 0; i < MinText-1; i++ {
		m.pow *= rkBase
	}
	keys := make([]string, 0, len(t.needles))
	for k := range t.needles {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		h := rkHash([]byte(k[:MinText]))
		m.byHash[h] = append(m.byHash[h], len(m.needles))
		m.needles = append(m.needles, k)
		m.what = append(m.what, t.needles[k])
	}
	return m
}

func rkHash(b []byte) uint64 {
	var h uint64
	for _, c := range b {
		h = h*rkBase + uint64(c)
	}
	return h
}

// find calls hit with the index of every needle found in data.
func (m *matcher) find(data []byte, hit func(i int)) {
	if len(data) < MinText || len(m.needles) == 0 {
		return
	}
	h := rkHash(data[:MinText])
	for i := 0; ; i++ {
		if cands, ok := m.byHash[h]; ok {
			for _, c := range cands {
				n := m.needles[c]
				if i+len(n) <= len(data) && string(data[i:i+len(n)]) == n {
					hit(c)
				}
			}
		}
		if i+MinText >= len(data) {
			return
		}
		h = (h-uint64(data[i])*m.pow)*rkBase + uint64(data[i+MinText])
	}
}

// verify reads everything there is to read for the texts.
func (e *Eraser) verify(ctx context.Context, sc Scope, t *texts) (*Verification, error) {
	m := newMatcher(t)
	v := &Verification{Texts: len(m.needles), TooShort: t.tooShort}
	seen := map[string]bool{}
	found := func(where, keptBy string) func(i int) {
		return func(i int) {
			key := where + "\x00" + m.needles[i]
			if seen[key] {
				return
			}
			seen[key] = true
			f := Finding{Where: where, What: m.what[i], KeptBy: keptBy}
			if th, ok := e.store.(TextHolder); ok && keptBy == "" && !strings.HasPrefix(where, "stream ") {
				if by, err := th.HoldsText(ctx, m.needles[i]); err == nil && by != "" {
					f.KeptBy = "a live record of another scope (" + by + ")"
				}
			}
			if f.KeptBy != "" {
				v.KeptCount++
			} else {
				v.FoundCount++
			}
			if len(v.Found) < maxFindings {
				v.Found = append(v.Found, f)
			}
		}
	}
	if rs, ok := e.store.(RawScanner); ok {
		pieces, bytes := 0, 0
		err := rs.ScanRaw(ctx, func(where string, data []byte) error {
			pieces++
			bytes += len(data)
			m.find(data, found(where, ""))
			return nil
		})
		if err != nil {
			return v, err
		}
		v.Searched = append(v.Searched, fmt.Sprintf("the store's persistence, raw: %d pieces, %d bytes", pieces, bytes))
	} else {
		v.Searched = append(v.Searched, "the store cannot show its persistence raw: not searched")
	}
	if e.bus != nil {
		counts, err := e.bus.scanAll(ctx, sc, func(where, keptBy string, data []byte) {
			m.find(data, found(where, keptBy))
		})
		for _, c := range counts {
			v.Searched = append(v.Searched, c)
		}
		if err != nil {
			return v, err
		}
	}
	if e.shelf != nil {
		letters, err := e.shelf.ParkedLetters(ctx)
		if err != nil {
			return v, err
		}
		for _, l := range letters {
			m.find(l.Data, found("parked letter "+l.Key, ""))
		}
		v.Searched = append(v.Searched, fmt.Sprintf("parked letters: %d", len(letters)))
	}
	for _, root := range e.files {
		n, size, gone := 0, int64(0), 0
		// The server writes while the files are read: a consumer's or a
		// stream's state is written to a .tmp file and renamed, so a file
		// listed may be gone when it is read. It is counted, not an error
		// (what it held is in the file it was renamed to or was replaced).
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) && path != root {
				gone++
				return nil
			}
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			if errors.Is(err, fs.ErrNotExist) {
				gone++
				return nil
			}
			if err != nil {
				return err
			}
			n++
			size += int64(len(b))
			m.find(b, found(path, ""))
			return nil
		})
		if err != nil {
			return v, fmt.Errorf("read %s: %w", root, err)
		}
		line := fmt.Sprintf("%s, raw: %d files, %d bytes", root, n, size)
		if gone > 0 {
			line += fmt.Sprintf(" (%d renamed away while read)", gone)
		}
		v.Searched = append(v.Searched, line)
	}
	return v, nil
}
