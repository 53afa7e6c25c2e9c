package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"testing"
	"unsafe"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/memorytest"
)

// BenchmarkResidentBytes says where the resident bytes of a loaded store go
// for LongMemEval-size memories (about 15 KB of text each: twenty
// consecutive memories of the development set's graph joined, from
// ENGRAM_EVAL_DIR, default ../../../../shared/eval/longmemeval-dev), with
// a 384-dimension vector each: the Go heap the loaded store holds, and by
// part (text of the heads, the rest of the heads, BM25 postings packed and
// plain, the term fingerprints, the dictionary, gates, vectors), per
// memory. With
// ENGRAM_HEAP_PROFILE=FILE it writes the loaded store's heap profile there.
// ENGRAM_RESIDENT_DB=FILE writes the store there and keeps it.
// ENGRAM_RESIDENT_N sets how many memories (default 1,000; past the 1,242
// consecutive joins the set holds, each further memory joins twenty of its
// memories drawn at random, so the vocabulary stays the set's as a big
// store's saturates).
func BenchmarkResidentBytes(b *testing.B) {
	path := filepath.Join(b.TempDir(), "engram.db")
	if keep := os.Getenv("ENGRAM_RESIDENT_DB"); keep != "" {
		path = keep // the store is kept there (a fixture for engram bench inject -db)
	}
	count := memorytest.LongMemoriesCount(b, 1000)
	textBytes := 0
	if _, err := os.Stat(path); err == nil && os.Getenv("ENGRAM_RESIDENT_DB") != "" {
		b.Logf("%s: measuring the memories it holds", path) // a kept fixture
	} else {
		nodes := seedLongMemEval(b, path, count)
		for i := range nodes {
			textBytes += len(nodes[i].Label) + len(nodes[i].Body)
		}
	}
	heap := func() (alloc, inuse uint64) {
		runtime.GC()
		debug.FreeOSMemory()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc, ms.HeapInuse
	}
	before, beforeInuse := heap()
	// As serve opens it (ENGRAM_RESIDENT_BACKGROUND=1: loaded in the
	// background, waited for), or in one go.
	opt := WithBulkWrites()
	if os.Getenv("ENGRAM_RESIDENT_BACKGROUND") != "" {
		opt = WithBackgroundLoad()
	}
	s, err := Open(context.Background(), path, opt)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	<-s.loaded
	if err := s.WaitIndexed(context.Background()); err != nil {
		b.Fatal(err)
	}
	after, afterInuse := heap()
	if out := os.Getenv("ENGRAM_HEAP_PROFILE"); out != "" {
		// The heap of the loaded store, by allocation site (go tool pprof
		// -sample_index=inuse_space; run with -memprofilerate 512).
		f, err := os.Create(out)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.WriteHeapProfile(f); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	x := s.idx
	n := float64(len(x.byID))
	var text, heads, postings, docTerms, vecs, terms, plain, packed, dense int
	for _, h := range x.heads {
		if h == nil {
			continue
		}
		text += len(h.label) + len(h.body())
		heads += int(unsafe.Sizeof(*h)) + len(h.id) // the digest is in the head
		if e := h.extra; e != nil {
			heads += int(unsafe.Sizeof(*e)) + len(e.supersededBy) + cap(e.paths)*16 + cap(e.entities)*int(unsafe.Sizeof(memory.Entity{}))
			for _, p := range e.paths {
				heads += len(p)
			}
			for _, en := range e.entities {
				heads += len(en.Key) + len(en.Name)
			}
			if e.exact != nil {
				heads += int(unsafe.Sizeof(*e.exact))
			}
		}
	}
	for i := range x.lex.tms {
		tm := &x.lex.tms[i]
		postings += cap(tm.rids)*4 + cap(tm.tfs)*2
		plain += cap(tm.rids)*4 + cap(tm.tfs)*2
		if tm.bl != nil {
			postings += int(unsafe.Sizeof(*tm.bl)) + cap(tm.bl.skip)*4 + cap(tm.bl.data)
			packed += len(tm.bl.skip)*4 + len(tm.bl.data)
		}
		terms += len(x.lex.tms[i].name)
	}
	for _, d := range x.lex.dense {
		dense += cap(d) * 2 // the commonest terms' dense copies (dense.go)
	}
	// The dictionary: the term table, the names (above), the three sorted
	// runs of names (string headers) and the name -> id map (its entries:
	// a string header and an id, about 1.5x for the map's slack).
	terms += cap(x.lex.tms)*int(unsafe.Sizeof(term{})) +
		(cap(x.lex.dict)+cap(x.lex.mid)+cap(x.lex.recent))*16 + len(x.lex.ids)*30
	docTerms = cap(x.lex.docPrint) * 8 // the fingerprints (the term lists are gone)
	for _, fv := range x.flat {
		for _, c := range fv.codes {
			vecs += cap(c) + 4 // the code and its scale
		}
	}
	graph := 0 // the vector graphs built (serve's): their links and id maps
	for _, ix := range x.vecs {
		v, g, ids := ix.Footprint()
		vecs += v
		graph += g + ids
	}
	gates := cap(x.gates) * int(unsafe.Sizeof(gate{}))
	// Per row: the heads' pointers, document lengths, the id -> rid map
	// (a string header and a rid, about 1.5x for the map's slack; the ids
	// are the heads') and the conversation lists.
	rows := cap(x.heads)*8 + cap(x.lex.docLen)*4 + len(x.byID)*30
	for _, l := range x.convs {
		rows += cap(l.rids) * 4
	}
	for b.Loop() {
	}
	if textBytes > 0 {
		b.ReportMetric(float64(textBytes)/n, "text-bytes/memory")
	}
	b.ReportMetric(float64(after-before)/n, "heap-bytes/memory")
	b.ReportMetric(float64(afterInuse-beforeInuse)/n, "heap-inuse-bytes/memory")
	b.ReportMetric(float64(text)/n, "head-text-bytes/memory")
	b.ReportMetric(float64(heads)/n, "head-rest-bytes/memory")
	b.ReportMetric(float64(postings)/n, "postings-bytes/memory")
	b.ReportMetric(float64(plain)/n, "postings-plain-bytes/memory")
	b.ReportMetric(float64(packed)/n, "postings-packed-bytes/memory")
	b.ReportMetric(float64(dense)/n, "postings-dense-bytes/memory")
	b.ReportMetric(float64(docTerms)/n, "docterms-bytes/memory")
	b.ReportMetric(float64(terms)/n, "dictionary-bytes/memory")
	b.ReportMetric(float64(len(x.lex.tms)), "terms")
	b.ReportMetric(float64(gates)/n, "gate-bytes/memory")
	b.ReportMetric(float64(vecs)/n, "vector-bytes/memory")
	b.ReportMetric(float64(graph)/n, "vector-graph-bytes/memory")
	b.ReportMetric(float64(rows)/n, "rows-bytes/memory")
}

// seedLongMemEval writes count LongMemEval-size memories
// (memorytest.LongMemories) into a new store at path and returns them.
func seedLongMemEval(b *testing.B, path string, count int) []memory.Node {
	b.Helper()
	nodes := memorytest.LongMemories(b, "../../../../shared/eval/longmemeval-dev", count)
	s, err := Open(context.Background(), path, WithBulkWrites())
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(nodes); i += 100 {
		if err := s.PutBatch(context.Background(), nodes[i:min(i+100, len(nodes))], nil); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	return nodes
}
