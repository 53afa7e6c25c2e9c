package eval

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/engram-memory/engram/internal/memio"
)

// Question is one line of a questions file.
type Question struct {
	Project  string   `json:"project"`
	Question string   `json:"question"`
	Evidence []string `json:"evidence"`
	Category string   `json:"category,omitempty"`
	// Date is the time the question is asked (question_date): the turn's
	// time, from which recency and time words are judged. Zero: right
	// after the conversation, when its project's latest memory was
	// written (memory.Written; LoCoMo's questions have no date).
	Date   time.Time       `json:"question_date,omitzero"`
	Answer json.RawMessage `json:"answer,omitempty"` // for reading (text or a number); retrieval metrics do not use it
}

// ErrInvalid wraps every problem of an input file.
var ErrInvalid = errors.New("eval: invalid input")

// ReadQuestions reads a questions file (JSON lines; plain or gzip). Every
// problem is reported with its line number; a file with any is refused.
func ReadQuestions(r io.Reader) ([]Question, error) {
	r, err := maybeGzip(r)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), memio.MaxLine)
	var (
		qs   []Question
		errs []error
		no   int
	)
	for sc.Scan() {
		no++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var q Question
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&q); err != nil {
			errs = append(errs, fmt.Errorf("%w: questions line %d: %v", ErrInvalid, no, err))
			continue
		}
		var missing []string
		if strings.TrimSpace(q.Project) == "" {
			missing = append(missing, "project")
		}
		if strings.TrimSpace(q.Question) == "" {
			missing = append(missing, "question")
		}
		if len(q.Evidence) == 0 {
			missing = append(missing, "evidence")
		}
		if len(missing) > 0 {
			errs = append(errs, fmt.Errorf("%w: questions line %d: missing %s", ErrInvalid, no, strings.Join(missing, ", ")))
			continue
		}
		qs = append(qs, q)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("eval: read questions line %d: %w", no+1, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(qs) == 0 {
		return nil, fmt.Errorf("%w: the questions file holds no question", ErrInvalid)
	}
	return qs, nil
}

// Projects are the distinct projects the questions ask about.
func Projects(qs []Question) map[string]bool {
	out := make(map[string]bool)
	for _, q := range qs {
		out[q.Project] = true
	}
	return out
}

// FilterGraph copies from r (the import format, plain or gzip) to w the
// lines that the projects need: their nodes, nodes of no project (global),
// and edges whose both ends are kept. It returns how many node lines it
// kept. Lines it cannot read are passed on for the import to report.
func FilterGraph(r io.Reader, w io.Writer, projects map[string]bool) (int, error) {
	r, err := maybeGzip(r)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), memio.MaxLine)
	kept := map[string]bool{}
	var edges [][]byte
	nodes := 0
	bw := bufio.NewWriter(w)
	for sc.Scan() {
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var l struct {
			Type      string `json:"type"`
			ID        string `json:"id"`
			ProjectID string `json:"project_id"`
		}
		if err := json.Unmarshal(raw, &l); err != nil || (l.Type != "node" && l.Type != "edge") {
			// Let the import say what is wrong with it.
			if _, err := bw.Write(append(raw, '\n')); err != nil {
				return nodes, err
			}
			continue
		}
		if l.Type == "edge" {
			edges = append(edges, append([]byte(nil), raw...))
			continue
		}
		if l.ProjectID != "" && !projects[l.ProjectID] {
			continue
		}
		kept[l.ID] = true
		nodes++
		if _, err := bw.Write(append(raw, '\n')); err != nil {
			return nodes, err
		}
	}
	if err := sc.Err(); err != nil {
		return nodes, fmt.Errorf("eval: read graph: %w", err)
	}
	for _, raw := range edges {
		var e struct {
			Src string `json:"src"`
			Dst string `json:"dst"`
		}
		if json.Unmarshal(raw, &e) == nil && kept[e.Src] && kept[e.Dst] {
			if _, err := bw.Write(append(raw, '\n')); err != nil {
				return nodes, err
			}
		}
	}
	return nodes, bw.Flush()
}

// maybeGzip unwraps a gzip stream (recognised by its magic bytes).
func maybeGzip(r io.Reader) (io.Reader, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(2)
	if err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("eval: gzip: %w", err)
		}
		return zr, nil
	}
	return br, nil
}

// Sample keeps n questions evenly spaced through qs (all when n <= 0 or n
// >= len(qs)): a fixed slice that draws from every part of a file sorted by
// category.
func Sample(qs []Question, n int) []Question {
	if n <= 0 || n >= len(qs) {
		return qs
	}
	out := make([]Question, 0, n)
	for i := range n {
		out = append(out, qs[i*len(qs)/n])
	}
	return out
}
