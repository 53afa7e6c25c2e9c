package erase

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	goredis "github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/engram-memory/engram/internal/idle"
	"github.com/engram-memory/engram/internal/natsembed"
	"github.com/engram-memory/engram/internal/storetest"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm/hashembed"
	"github.com/engram-memory/engram/pkg/memory"
	redisstore "github.com/engram-memory/engram/pkg/memory/redis"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// TestMain keeps the property test's cases few by default (each erases
// and verifies a whole store and the streams): -rapid.checks or
// RAPID_CHECKS ask for more.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue && os.Getenv("RAPID_CHECKS") == "" {
		_ = f.Value.Set("15")
	}
	os.Exit(m.Run())
}

// bus is a real embedded NATS server with a file store (not encrypted, so
// that its files can be read raw) and the topology.
type testBus struct {
	dir  string
	nc   *nats.Conn
	js   jetstream.JetStream
	topo events.Topology
	kv   jetstream.KeyValue
}

func startBus(t *testing.T) *testBus {
	t.Helper()
	dir := t.TempDir()
	srv, err := natsembed.Start(natsembed.Options{StoreDir: dir, Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topo := events.DefaultTopology()
	if err := events.EnsureTopology(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: idle.DefaultBucket, History: 5})
	if err != nil {
		t.Fatal(err)
	}
	return &testBus{dir: dir, nc: nc, js: js, topo: topo, kv: kv}
}

// purge empties the streams between cases.
func (b *testBus) purge(ctx context.Context, rt *rapid.T) {
	for _, name := range []string{b.topo.In.Name, b.topo.Out.Name, b.topo.DLQ.Name, "KV_" + idle.DefaultBucket} {
		st, err := b.js.Stream(ctx, name)
		if err != nil {
			rt.Fatal(err)
		}
		if err := st.Purge(ctx); err != nil {
			rt.Fatal(err)
		}
	}
}

var (
	tenants  = []string{"", "acme", "globex"}
	projects = []string{"alpha", "beta"}
	sessions = []string{"s1", "s2", "s3"}
	words    = []string{"amber", "river", "stone", "maple", "quartz", "violet", "harbor", "cinder", "meadow", "falcon", "lantern", "orchid"}
)

// world is what one case wrote, and the model of what an erasure of a
// scope removes.
type world struct {
	caseNo int
	seq    int
	nodes  []memory.Node
	edges  [][2]string // distinct src, dst (relates_to)
	// per session: its texts (messages, summaries, injection, pass
	// reason), whether it has each record
	sessions map[memory.SessionRef]*sessionRecs
	projects map[memory.ProjectRef]int // processed-event records
	msgs     []busMsg
	keys     map[memory.SessionRef]int // activity records (revisions)
	// every text written, with the scope records it belongs to
	texts map[string]textOwner
}

type sessionRecs struct {
	messages, summaries int
	injIDs              []string
	passEntries         []memory.JournalEntry
}

type textOwner struct {
	ref  memory.SessionRef // the record's session (Session "" for a project's)
	node *memory.Node      // a node's text: the node decides
	// inj: the text of an injection record, which also goes when it names
	// an erased node
	inj []string
}

type busMsg struct {
	stream  string
	subject string
	header  nats.Header
	body    []byte
	refs    []memory.SessionRef // what names it: subject, header, body
	text    string
}

func (w *world) text(rt *rapid.T, label string) string {
	w.seq++
	n := rapid.IntRange(1, 3).Draw(rt, label)
	ws := make([]string, n)
	for i := range ws {
		ws[i] = rapid.SampledFrom(words).Draw(rt, label)
	}
	// A token no other text holds, first: a text is found only where it
	// was written (at most 48 bytes: looked for whole).
	return fmt.Sprintf("zq%dx%d %s", w.caseNo, w.seq, strings.Join(ws, " "))
}

func refOf(rt *rapid.T, label string) memory.SessionRef {
	return memory.SessionRef{Tenant: rapid.SampledFrom(tenants).Draw(rt, label+" tenant"),
		Project: rapid.SampledFrom(projects).Draw(rt, label+" project"), Session: rapid.SampledFrom(sessions).Draw(rt, label+" session")}
}

func holdsRef(sc Scope, ref memory.SessionRef) bool {
	if ref.Session == "" {
		return sc.HoldsProject(ref.ProjectRef())
	}
	return sc.HoldsSession(ref)
}

// seed writes a random world into st and the bus.
func seed(ctx context.Context, rt *rapid.T, caseNo int, st memory.Store, b *testBus) *world {
	w := &world{caseNo: caseNo, sessions: map[memory.SessionRef]*sessionRecs{}, projects: map[memory.ProjectRef]int{},
		keys: map[memory.SessionRef]int{}, texts: map[string]textOwner{}}
	for i, n := 0, rapid.IntRange(4, 14).Draw(rt, "nodes"); i < n; i++ {
		ref := refOf(rt, "node")
		nd := memory.Node{TenantID: ref.Tenant, ProjectID: ref.Project, SessionID: ref.Session, Subkind: memory.Observation,
			Scope: rapid.SampledFrom([]memory.Scope{memory.ScopeProject, memory.ScopeSession, memory.ScopeGlobal}).Draw(rt, "scope"),
			Label: w.text(rt, "label"), Body: w.text(rt, "body")}
		if nd.Scope == memory.ScopeGlobal {
			nd.ProjectID = ""
		}
		res, err := st.Upsert(ctx, nd)
		if err != nil {
			rt.Fatalf("Upsert: %v", err)
		}
		n := res.Node
		w.nodes = append(w.nodes, n)
		w.texts[n.Label] = textOwner{node: &w.nodes[len(w.nodes)-1]}
		w.texts[n.Body] = textOwner{node: &w.nodes[len(w.nodes)-1]}
	}
	for i, n := 0, rapid.IntRange(2, 10).Draw(rt, "edges"); i < n; i++ {
		a := rapid.SampledFrom(w.nodes).Draw(rt, "src")
		z := rapid.SampledFrom(w.nodes).Draw(rt, "dst")
		if a.ID == z.ID || a.TenantID != z.TenantID || slices.Contains(w.edges, [2]string{a.ID, z.ID}) {
			continue
		}
		if _, err := st.Link(ctx, memory.Edge{Src: a.ID, Dst: z.ID, Relation: memory.RelatesTo}); err != nil {
			rt.Fatalf("Link: %v", err)
		}
		w.edges = append(w.edges, [2]string{a.ID, z.ID})
	}
	if _, err := memory.EmbedPending(ctx, st, hashembed.New(64), 256); err != nil {
		rt.Fatalf("EmbedPending: %v", err)
	}
	for i, n := 0, rapid.IntRange(2, 6).Draw(rt, "sessions"); i < n; i++ {
		ref := refOf(rt, "session")
		if w.sessions[ref] != nil {
			continue
		}
		r := &sessionRecs{}
		w.sessions[ref] = r
		var msgs []memory.Message
		for j, m := 0, rapid.IntRange(1, 3).Draw(rt, "messages"); j < m; j++ {
			t := w.text(rt, "message")
			msgs = append(msgs, memory.Message{Role: memory.RoleUser, Content: t})
			w.texts[t] = textOwner{ref: ref}
		}
		if _, _, err := st.AppendTranscript(ctx, ref, "turn-1", msgs); err != nil {
			rt.Fatalf("AppendTranscript: %v", err)
		}
		r.messages = len(msgs)
		for j, m := 0, rapid.IntRange(0, 2).Draw(rt, "summaries"); j < m; j++ {
			t := w.text(rt, "summary")
			if err := st.SaveSummary(ctx, ref, memory.Summary{Content: t, UpTo: 1}); err != nil {
				rt.Fatalf("SaveSummary: %v", err)
			}
			w.texts[t] = textOwner{ref: ref}
			r.summaries++
		}
		if _, err := st.AdvanceCursor(ctx, ref, 1); err != nil {
			rt.Fatal(err)
		}
		if _, err := st.BriefOnce(ctx, ref, time.Hour); err != nil {
			rt.Fatal(err)
		}
		if _, err := st.AcquireLease(ctx, ref, "extract", "w1", time.Hour); err != nil {
			rt.Fatal(err)
		}
		mine := func(n memory.Node) bool { return n.TenantID == ref.Tenant }
		var ofTenant []memory.Node
		for _, n := range w.nodes {
			if mine(n) {
				ofTenant = append(ofTenant, n)
			}
		}
		in := memory.Injection{IDs: []string{}, Text: w.text(rt, "block")}
		if len(ofTenant) > 0 {
			for _, n := range rapid.SliceOfNDistinct(rapid.SampledFrom(ofTenant), 0, 2, func(n memory.Node) string { return n.ID }).Draw(rt, "injected") {
				in.IDs = append(in.IDs, n.ID)
			}
		}
		if err := st.PutInjection(ctx, ref, "turn-1", in, 0); err != nil {
			rt.Fatal(err)
		}
		r.injIDs = in.IDs
		w.texts[in.Text] = textOwner{ref: ref, inj: in.IDs}
		pass := memory.Pass{ID: fmt.Sprintf("pass%d", w.seq), Tenant: ref.Tenant, Project: ref.Project, Session: ref.Session,
			Status: memory.PassFinished, StartedAt: time.Now(), UpdatedAt: time.Now()}
		for _, n := range ofTenant {
			if rapid.Bool().Draw(rt, "journaled") {
				pass.Entries = append(pass.Entries, memory.JournalEntry{Op: memory.OpLink, NodeID: n.ID, Reason: "linked", At: time.Now()})
			}
		}
		if err := st.PutPass(ctx, pass); err != nil {
			rt.Fatal(err)
		}
		r.passEntries = pass.Entries
		if err := st.MarkEventProcessed(ctx, ref.ProjectRef(), "extractor", fmt.Sprintf("ev%d", w.seq), 0); err != nil {
			rt.Fatal(err)
		}
		w.projects[ref.ProjectRef()]++
		w.seq++
	}
	// The bus: input and output events, dead letters, activity.
	subj := b.topo.Subjects()
	for i, n := 0, rapid.IntRange(2, 10).Draw(rt, "events"); i < n; i++ {
		ref := refOf(rt, "event")
		bodyRef := ref
		if rapid.IntRange(0, 4).Draw(rt, "forged") == 0 {
			bodyRef = refOf(rt, "forged body") // a body that names another session than its subject
		}
		t := w.text(rt, "event")
		body, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("e%d-%d", caseNo, w.seq), "type": "turn_ended",
			"tenant_id": bodyRef.Tenant, "project_id": bodyRef.Project, "session_id": bodyRef.Session, "text": t})
		m := busMsg{body: body, text: t, refs: []memory.SessionRef{bodyRef}}
		switch rapid.IntRange(0, 3).Draw(rt, "where") {
		case 0:
			m.stream, m.subject = b.topo.In.Name, inSubject(subj, events.TypeTurnEnded, ref)
			m.refs = append(m.refs, subjectRefOf(ref))
		case 1:
			out := ref
			if rapid.Bool().Draw(rt, "project event") {
				out.Session = ""
				bodyRef.Session = ""
			}
			m.stream, m.subject = b.topo.Out.Name, outSubject(subj, events.TypeMemoryChanged, out)
			m.refs = append(m.refs, subjectRefOf(out))
		case 2:
			m.stream, m.subject = b.topo.DLQ.Name, subj.DLQ("extractor")
			m.header = nats.Header{}
			m.header.Set(events.HeaderDLQSubject, inSubject(subj, events.TypeTurnEnded, ref))
			m.refs = append(m.refs, subjectRefOf(ref))
		default:
			// A letter cut short: the body is not JSON, only the header
			// names the session.
			m.stream, m.subject = b.topo.DLQ.Name, subj.DLQ("extractor")
			m.header = nats.Header{}
			m.header.Set(events.HeaderDLQSubject, inSubject(subj, events.TypeTurnEnded, ref))
			m.body = []byte(`{"id":"x","text":"` + t + `","cut`)
			m.refs = []memory.SessionRef{subjectRefOf(ref)}
		}
		w.msgs = append(w.msgs, m)
	}
	// A letter nobody can attribute: kept by every erasure.
	t := w.text(rt, "orphan")
	w.msgs = append(w.msgs, busMsg{stream: b.topo.DLQ.Name, subject: subj.DLQ("injector"), body: []byte("garbage " + t), text: t})
	for _, m := range w.msgs {
		msg := &nats.Msg{Subject: m.subject, Header: m.header, Data: m.body}
		if _, err := b.js.PublishMsg(ctx, msg); err != nil {
			rt.Fatalf("publish %s: %v", m.subject, err)
		}
	}
	for ref := range w.sessions {
		for rev := range 2 {
			if _, err := b.kv.Put(ctx, idle.Key(ref.Tenant, ref.Project, ref.Session), []byte(fmt.Sprintf(`{"rev":%d}`, rev))); err != nil {
				rt.Fatal(err)
			}
		}
		w.keys[ref] = 2
	}
	return w
}

// expected is the model's receipt of erasing sc.
func (w *world) expected(sc Scope, b *testBus) (memory.Erased, map[string]int, map[string]bool) {
	var e memory.Erased
	gone := map[string]bool{}
	for _, n := range w.nodes {
		if sc.HoldsNode(&n) {
			gone[n.ID] = true
			e.Memories++
			e.Vectors++
		}
	}
	for _, ed := range w.edges {
		if gone[ed[0]] || gone[ed[1]] {
			e.Edges++
		}
	}
	for ref, r := range w.sessions {
		if sc.HoldsSession(ref) {
			e.Messages += r.messages
			e.Turns++
			e.Summaries += r.summaries
			e.Cursors++
			e.Briefings++
			e.Leases++
			e.Injections++
			e.Passes++
			continue
		}
		if slices.ContainsFunc(r.injIDs, func(id string) bool { return gone[id] }) {
			e.Injections++
		}
		for _, en := range r.passEntries {
			if gone[en.NodeID] {
				e.JournalEntries++
			}
		}
	}
	for p, n := range w.projects {
		if sc.HoldsProject(p) {
			e.Processed += n
		}
	}
	streams := map[string]int{}
	for _, m := range w.msgs {
		if slices.ContainsFunc(m.refs, func(r memory.SessionRef) bool { return holdsRef(sc, r) }) {
			streams[m.stream]++
		}
	}
	for ref, n := range w.keys {
		if sc.HoldsSession(ref) {
			streams["KV_"+idle.DefaultBucket] += n
		}
	}
	// The texts that must be gone.
	erased := map[string]bool{}
	for t, o := range w.texts {
		switch {
		case o.node != nil:
			erased[t] = gone[o.node.ID]
		default:
			erased[t] = sc.HoldsSession(o.ref) || slices.ContainsFunc(o.inj, func(id string) bool { return gone[id] })
		}
	}
	for _, m := range w.msgs {
		if m.text != "" {
			erased[m.text] = slices.ContainsFunc(m.refs, func(r memory.SessionRef) bool { return holdsRef(sc, r) })
		}
	}
	return e, streams, erased
}

type backend struct {
	name  string
	open  func(t *testing.T) memory.Store
	raw   func(ctx context.Context, rt *rapid.T, st memory.Store) [][]byte // the store's persistence, read by the test itself
	redis goredis.UniversalClient
}

// TestErasureLeavesNothing is the property (see the package doc).
func TestErasureLeavesNothing(t *testing.T) {
	var backends []backend
	backends = append(backends, backend{name: "sqlite", open: func(t *testing.T) memory.Store { return storetest.OpenSQLite(t) },
		raw: func(_ context.Context, rt *rapid.T, st memory.Store) [][]byte {
			path := st.(*sqlite.Store).Path()
			var out [][]byte
			for _, f := range []string{path, path + "-wal", path + "-journal"} {
				b, err := os.ReadFile(f)
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					rt.Fatal(err)
				}
				out = append(out, b)
			}
			return out
		}})
	if os.Getenv("ENGRAM_TEST_REDIS_URL") != "" || os.Getenv("CI") != "" {
		backends = append(backends, backend{name: "redis", open: func(t *testing.T) memory.Store { return storetest.OpenRedis(t) }, raw: redisRaw})
	}
	if os.Getenv("ENGRAM_TEST_REDIS_CLUSTER") != "" {
		backends = append(backends, backend{name: "redis-cluster", open: openCluster, raw: redisRaw})
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			b := startBus(t)
			cases, erasedTexts, keptTexts := 0, 0, 0
			var counted memory.Erased
			rapid.Check(t, func(rt *rapid.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				cases++
				b.purge(ctx, rt)
				st := be.open(t)
				w := seed(ctx, rt, cases, st, b)
				// Mostly a session, project or tenant that holds something.
				used := []memory.SessionRef{refOf(rt, "erase")}
				for r := range w.sessions {
					used = append(used, r)
				}
				for _, n := range w.nodes {
					used = append(used, memory.SessionRef{Tenant: n.TenantID, Project: n.ProjectID, Session: n.SessionID})
				}
				slices.SortFunc(used, func(a, b memory.SessionRef) int { return strings.Compare(a.String(), b.String()) })
				ref := rapid.SampledFrom(used).Draw(rt, "erase")
				if ref.Project == "" {
					ref.Project = rapid.SampledFrom(projects).Draw(rt, "erase project")
				}
				if ref.Session == "" {
					ref.Session = rapid.SampledFrom(sessions).Draw(rt, "erase session")
				}
				sc := Scope{Tenant: ref.Tenant, Project: ref.Project, Session: ref.Session}
				switch k := rapid.IntRange(0, 2).Draw(rt, "kind"); {
				case k == 0 && sc.Tenant != "":
					sc.Project, sc.Session = "", ""
				case k == 1:
					sc.Session = ""
				}
				wantStore, wantStreams, erased := w.expected(sc, b)
				e := New(st, WithBus(NewBus(b.js, b.topo)), WithFiles(b.dir))
				r, err := e.Erase(ctx, sc, Options{Verify: true})
				if err != nil {
					rt.Fatalf("Erase %s: %v", sc, err)
				}
				if r.Store != wantStore {
					rt.Fatalf("Erase %s: the store counted\n %+v, want\n %+v", sc, r.Store, wantStore)
				}
				// Both stores confirm their deletions durable (SQLite's log
				// synced, Redis on its replicas: these test servers have none).
				if !slices.ContainsFunc(r.Persistence.Done, func(d string) bool { return strings.HasPrefix(d, "store: the deletions are durable") }) {
					rt.Fatalf("Erase %s: the receipt does not say the deletions are durable: %v", sc, r.Persistence.Done)
				}
				for _, name := range []string{b.topo.In.Name, b.topo.Out.Name, b.topo.DLQ.Name, "KV_" + idle.DefaultBucket} {
					if r.Streams[name] != wantStreams[name] {
						rt.Fatalf("Erase %s: stream %s counted %d, want %d (receipt %v)", sc, name, r.Streams[name], wantStreams[name], r.Streams)
					}
				}
				if r.Verify == nil || r.Verify.FoundCount != 0 || r.Verify.KeptCount != 0 || !r.Complete() {
					var sb strings.Builder
					r.WriteText(&sb)
					rt.Fatalf("the erasure's own verification:\n%s", sb.String())
				}
				counted.Add(r.Store)
				// Read everything raw here, without the package's code.
				var raw [][]byte
				raw = append(raw, be.raw(ctx, rt, st)...)
				raw = append(raw, streamBodies(ctx, rt, b)...)
				raw = append(raw, dirFiles(rt, b.dir)...)
				for text, gone := range erased {
					in := slices.ContainsFunc(raw, func(d []byte) bool { return bytes.Contains(d, []byte(text)) })
					switch {
					case gone && in:
						rt.Fatalf("erased %s: %q is still there", sc, text)
					case gone:
						erasedTexts++
					default:
						keptTexts++
					}
				}
				w.checkKept(ctx, rt, st, b, sc, erased)
			})
			t.Logf("%s: %d cases, %d erased texts found nowhere, %d kept texts checked; counted %+v", be.name, cases, erasedTexts, keptTexts, counted)
		})
	}
}

// checkKept: what the scope does not hold reads back as written.
func (w *world) checkKept(ctx context.Context, rt *rapid.T, st memory.Store, b *testBus, sc Scope, erased map[string]bool) {
	for _, n := range w.nodes {
		got, err := st.Get(ctx, n.ID)
		switch {
		case sc.HoldsNode(&n) && !errors.Is(err, memory.ErrNotFound):
			rt.Fatalf("erased node %s: Get %v", n.ID, err)
		case !sc.HoldsNode(&n) && (err != nil || got.Label != n.Label || got.Body != n.Body):
			rt.Fatalf("kept node %s: %+v %v", n.ID, got, err)
		}
	}
	for ref, r := range w.sessions {
		msgs, err := st.Messages(ctx, ref, 0, 0)
		if err != nil {
			rt.Fatal(err)
		}
		want := r.messages
		if sc.HoldsSession(ref) {
			want = 0
		}
		if len(msgs) != want {
			rt.Fatalf("session %s: %d messages, want %d", ref, len(msgs), want)
		}
		_, err = b.kv.Get(ctx, idle.Key(ref.Tenant, ref.Project, ref.Session))
		if gone := errors.Is(err, jetstream.ErrKeyNotFound); gone != sc.HoldsSession(ref) {
			rt.Fatalf("activity of %s: %v (erased: %v)", ref, err, sc.HoldsSession(ref))
		}
	}
	var bodies [][]byte
	bodies = append(bodies, streamBodies(ctx, rt, b)...)
	for _, m := range w.msgs {
		if !erased[m.text] && !slices.ContainsFunc(bodies, func(d []byte) bool { return bytes.Contains(d, []byte(m.text)) }) {
			rt.Fatalf("the kept message %s %q is gone", m.subject, m.body)
		}
	}
}

// streamBodies reads every message of every stream (subject, headers and
// body).
func streamBodies(ctx context.Context, rt *rapid.T, b *testBus) [][]byte {
	var out [][]byte
	for _, name := range []string{b.topo.In.Name, b.topo.Out.Name, b.topo.DLQ.Name, "KV_" + idle.DefaultBucket} {
		st, err := b.js.Stream(ctx, name)
		if err != nil {
			rt.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			rt.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := st.GetMsg(ctx, seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			if err != nil {
				rt.Fatal(err)
			}
			var hb bytes.Buffer
			for k, vs := range m.Header {
				hb.WriteString(k + ":" + strings.Join(vs, ",") + "\n")
			}
			out = append(out, []byte(m.Subject+"\n"+hb.String()+string(m.Data)))
		}
	}
	return out
}

// dirFiles reads every file of the JetStream store raw.
func dirFiles(rt *rapid.T, dir string) [][]byte {
	var out [][]byte
	// The server keeps writing while the store is read: a consumer's state
	// file is written as o.dat.tmp and renamed, so a file listed may be gone
	// by the time it is read. What vanished held nothing to check.
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err == nil {
			out = append(out, b)
		}
		return err
	})
	if err != nil {
		rt.Fatal(err)
	}
	return out
}

// redisRaw reads every key of the store's namespace on every master, and
// what each holds.
func redisRaw(ctx context.Context, rt *rapid.T, st memory.Store) [][]byte {
	rs := st.(*redisstore.Store)
	var out [][]byte
	read := func(ctx context.Context, c *goredis.Client) error {
		iter := c.Scan(ctx, 0, rs.Namespace()+":*", 5000).Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			var b bytes.Buffer
			b.WriteString(key + "\n")
			typ, err := c.Type(ctx, key).Result()
			if err != nil {
				return err
			}
			var vals []string
			switch typ {
			case "string":
				v, _ := c.Get(ctx, key).Result()
				vals = []string{v}
			case "hash":
				for k, v := range c.HGetAll(ctx, key).Val() {
					vals = append(vals, k, v)
				}
			case "list":
				vals = c.LRange(ctx, key, 0, -1).Val()
			case "set":
				vals = c.SMembers(ctx, key).Val()
			case "zset":
				vals = c.ZRange(ctx, key, 0, -1).Val()
			case "vectorset":
				n := c.VCard(ctx, key).Val()
				vals = c.VRandMemberCount(ctx, key, int(n)).Val()
			}
			b.WriteString(strings.Join(vals, "\n"))
			out = append(out, b.Bytes())
		}
		return iter.Err()
	}
	var err error
	switch c := rs.Client().(type) {
	case *goredis.ClusterClient:
		err = c.ForEachMaster(ctx, read)
	case *goredis.Client:
		err = read(ctx, c)
	}
	if err != nil {
		rt.Fatal(err)
	}
	return out
}

func openCluster(t *testing.T) memory.Store {
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: strings.Split(os.Getenv("ENGRAM_TEST_REDIS_CLUSTER"), ",")})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		t.Fatalf("Redis cluster: %v", err)
	}
	ns := fmt.Sprintf("erase%d", time.Now().UnixNano())
	st, err := redisstore.New(c, redisstore.WithNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	// At the latest format, as a deployment runs once its upgrade is
	// finished (pkg/memory/redis format.go).
	if _, err := st.FinishUpgrade(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = redisstore.DeleteNamespace(ctx, c, ns)
		_ = c.Close()
	})
	return st
}
