package memio_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/memio"
	"github.com/engram-memory/engram/internal/storetest"
)

// TestImportReportsTheFirstBadLines: a file of many bad lines reports the
// first MaxReported one by one and counts the others, and writes nothing.
func TestImportReportsTheFirstBadLines(t *testing.T) {
	st := storetest.OpenSQLite(t)
	var file strings.Builder
	file.WriteString(`{"type":"node","subkind":"decision","project_id":"p","label":"a good line"}` + "\n")
	for i := 0; i < memio.MaxReported+17; i++ {
		fmt.Fprintf(&file, "{\"type\":\"nod\",\"n\":%d}\n", i)
	}
	_, err := memio.Import(context.Background(), st, strings.NewReader(file.String()), "", time.Now())
	if err == nil {
		t.Fatal("imported a file of bad lines")
	}
	msg := err.Error()
	if n := strings.Count(msg, "invalid line "); n != memio.MaxReported {
		t.Errorf("%d lines reported one by one, want %d:\n%s", n, memio.MaxReported, msg)
	}
	if !strings.Contains(msg, "invalid line 2:") || !strings.Contains(msg, fmt.Sprintf("invalid line %d:", memio.MaxReported+1)) ||
		strings.Contains(msg, fmt.Sprintf("invalid line %d:", memio.MaxReported+2)) {
		t.Errorf("not the first %d lines:\n%s", memio.MaxReported, msg)
	}
	if !strings.Contains(msg, "17 more problems not listed") {
		t.Errorf("no count of the rest:\n%s", msg)
	}
	if n := countNodes(t, st); n != 0 {
		t.Errorf("%d nodes written", n)
	}
}

// TestDecompress: a gzip file and a plain one read the same.
func TestDecompress(t *testing.T) {
	const text = `{"type":"node","subkind":"decision","project_id":"p","label":"x"}` + "\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(text))
	_ = zw.Close()
	for name, in := range map[string][]byte{"plain": []byte(text), "gzip": gz.Bytes()} {
		r, err := memio.Decompress(bytes.NewReader(in))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := io.ReadAll(r)
		if err != nil || string(b) != text {
			t.Errorf("%s: %q %v", name, b, err)
		}
	}
	if _, err := memio.Decompress(bytes.NewReader([]byte{0x1f, 0x8b, 0})); err == nil {
		t.Error("a broken gzip header was accepted")
	}
}

// TestImportProgress: the progress callback sees the lines read and then
// every chunk written, ending at the whole.
func TestImportProgress(t *testing.T) {
	st := storetest.OpenSQLite(t)
	var file strings.Builder
	const n = 2*memio.WriteChunk + 10
	for i := 0; i < n; i++ {
		fmt.Fprintf(&file, "{\"type\":\"node\",\"subkind\":\"decision\",\"project_id\":\"p\",\"label\":\"decision number %d\"}\n", i)
	}
	var seen []memio.Progress
	stats, err := memio.Import(context.Background(), st, strings.NewReader(file.String()), "", time.Now(),
		memio.WithProgress(100, func(p memio.Progress) { seen = append(seen, p) }))
	if err != nil || stats.Nodes != n {
		t.Fatalf("import: %+v %v", stats, err)
	}
	last := seen[len(seen)-1]
	if seen[0].Lines != 100 || last.Lines != n || last.Written != n || last.Total != n {
		t.Errorf("progress: first %+v, last %+v", seen[0], last)
	}
	writes := 0
	for _, p := range seen {
		if p.Written > 0 {
			writes++
		}
	}
	if writes != 3 {
		t.Errorf("%d progress reports while writing, want one per chunk (3): %+v", writes, seen)
	}
}
