package extract

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
)

// Bounds applied to what the model proposes.
const (
	MinConfidence     = 0.1
	DefaultConfidence = 0.5
)

// prompt gathers what the model is shown besides the transcript: the
// memories injected into the span's turns and the related memories.
func (x *Extractor) prompt(ctx context.Context, ref memory.SessionRef, transcript string, injected []injectedTurn) (Prompt, map[string]bool, error) {
	p := Prompt{Transcript: transcript}
	shown := map[string]bool{}
	var ids []string
	for _, it := range injected {
		for _, id := range it.ids {
			if !shown[id] {
				shown[id] = true
				ids = append(ids, id)
			}
		}
	}
	if len(ids) > MaxReplyVerdicts {
		// The reply has room for this many verdicts: judge the latest turns'.
		for _, id := range ids[:len(ids)-MaxReplyVerdicts] {
			delete(shown, id)
		}
		ids = ids[len(ids)-MaxReplyVerdicts:]
	}
	if len(ids) > 0 {
		nodes, err := x.store.GetMany(ctx, ids)
		if err != nil {
			return p, nil, fmt.Errorf("extract: load injected memories: %w", err)
		}
		for i := range nodes {
			p.Injected = append(p.Injected, injectedLine(&nodes[i], x.cfg))
		}
	}
	if x.cfg.RelatedLimit > 0 {
		q := memory.Query{
			Text:    lastChars(transcript, x.cfg.RelatedQueryChars),
			Filter:  memory.Filter{TenantID: ref.Tenant, ProjectID: ref.Project, SessionID: ref.Session, MinConfidence: x.cfg.RelatedMinConfidence},
			Limit:   x.cfg.RelatedLimit,
			Expand:  false,
			Now:     x.now(),
			Ranking: x.cfg.Ranking,
		}
		if x.emb != nil {
			// Without a vector the lexical channel still finds related
			// memories; an embedder outage must not stop extraction.
			if vecs, err := x.emb.Embed(ctx, []string{q.Text}); err == nil && len(vecs) == 1 {
				q.Vector, q.Model = vecs[0], x.emb.Model()
			}
		}
		hits, err := memory.Retrieve(ctx, x.store, q)
		if err != nil {
			return p, nil, fmt.Errorf("extract: related memories: %w", err)
		}
		for i := range hits {
			if shown[hits[i].ID] {
				continue
			}
			shown[hits[i].ID] = true
			p.Related = append(p.Related, relatedLine(&hits[i].Node, x.cfg))
		}
	}
	return p, shown, nil
}

// toNode turns a proposed memory into a node of the session, applying the
// clamps: confidence in [0.1, 1] (0.5 when missing), label at most
// MaxLabelChars, body at most MaxBodyChars, at most 8 entities and paths;
// a global memory has no project; a session memory always has reach "here";
// the node is of the session's tenant; without cross (Config.CrossProject
// off) a global memory becomes a project one and reach is always "here".
// Secrets are redacted from everything the model wrote. ok is false when
// the memory has no text.
func toNode(m ReplyMemory, ref memory.SessionRef, cross bool) (memory.Node, bool) {
	n := memory.Node{
		TenantID:   ref.Tenant,
		Subkind:    memory.Subkind(m.Subkind),
		Scope:      memory.Scope(m.Scope),
		ProjectID:  ref.Project,
		SessionID:  ref.Session,
		Label:      capChars(oneLine(memory.Redact(m.Label)), MaxLabelChars),
		Body:       capChars(strings.TrimSpace(memory.Redact(m.Body)), MaxBodyChars),
		AssertedBy: memory.Authority(m.AssertedBy),
		Reach:      memory.Reach(m.Reach),
		Source:     memory.SourceAgent,
		Confidence: m.Confidence,
	}
	if n.Label == "" && n.Body == "" {
		return n, false
	}
	if n.Label == "" {
		n.Label = capChars(firstLine(n.Body), MaxLabelChars)
	}
	if !n.Subkind.Valid() || n.Subkind == memory.EntityKind || n.Subkind == memory.Topic {
		n.Subkind = memory.Observation
	}
	if !n.AssertedBy.Valid() {
		n.AssertedBy = memory.AssertedInferred
	}
	if !n.Reach.Valid() || !cross {
		n.Reach = memory.ReachHere
	}
	if !cross && n.Scope == memory.ScopeGlobal {
		n.Scope = memory.ScopeProject
	}
	switch n.Scope {
	case memory.ScopeGlobal:
		n.ProjectID = ""
	case memory.ScopeSession:
		n.Reach = memory.ReachHere
	default:
		n.Scope = memory.ScopeProject
	}
	if math.IsNaN(n.Confidence) || n.Confidence <= 0 {
		n.Confidence = DefaultConfidence
	}
	n.Confidence = math.Max(MinConfidence, math.Min(1, n.Confidence))
	for _, p := range m.Paths {
		p = strings.TrimPrefix(strings.TrimSpace(memory.Redact(p)), "./")
		if p != "" && len(n.Paths) < MaxReplyPaths {
			n.Paths = append(n.Paths, capChars(p, MaxPathChars))
		}
	}
	n.Paths = memory.NormalisePaths(n.Paths)
	for _, e := range m.Entities {
		if e = capChars(oneLine(memory.Redact(e)), MaxEntityChars); e != "" {
			n.Entities = append(n.Entities, memory.Entity{Name: e})
		}
	}
	n.Entities = memory.NormaliseEntities(n.Entities)
	return n, true
}

// relations returns the shown ids a proposed memory is the same as and the
// ones it contradicts (ids the model was not shown are dropped).
func relations(m ReplyMemory, shown map[string]bool) (same, opposite []string) {
	for _, r := range m.Relations {
		id := strings.TrimSpace(r.ID)
		if !shown[id] {
			continue
		}
		switch r.Relation {
		case "same":
			same = append(same, id)
		case "opposite":
			opposite = append(opposite, id)
		}
	}
	return same, opposite
}

// reinforcement is the upsert that reinforces old with what the model
// proposed: old's identity and text, the proposal's authority, confidence,
// reach, paths and entities (memory.Reinforce decides what rises).
func reinforcement(old, n memory.Node) memory.Node {
	r := memory.Node{
		ID: old.ID, TenantID: old.TenantID, Subkind: old.Subkind, Scope: old.Scope, ProjectID: old.ProjectID, SessionID: old.SessionID,
		Label: old.Label, Body: old.Body, Digest: old.Digest, Source: memory.SourceAgent,
		AssertedBy: n.AssertedBy, Reach: n.Reach, Confidence: n.Confidence,
		Paths: n.Paths, Entities: append(append([]memory.Entity(nil), old.Entities...), n.Entities...),
	}
	if r.Scope == memory.ScopeSession {
		r.Reach = memory.ReachHere
	}
	if len(r.Entities) > memory.MaxEntities {
		r.Entities = memory.NormaliseEntities(r.Entities)
	}
	return r
}

type writtenMemory struct {
	id  string
	vec []float32
}

// write applies the write rules to a reply: a memory the model calls "same"
// as a shown one, or within Config.SameCosine of one written earlier in this
// span, reinforces it instead of being stored; "opposite" links a
// contradicts edge to the shown memory; everything else is upserted (an
// identical digest reinforces). New memories carry their vector when the
// embedder answered; otherwise the backlog embedder fills it in later.
//
// said is what the user said in the span (their messages only): a memory
// the model marks as stated by the user must share a word with it
// (memory.Grounded).
//
// wrote reports whether a memory was written, also when err is not nil:
// each such write may be on another slot than the span's project's (see
// memory.Replicated: a memory created has its id's entry in the store's
// id index, on a slot of its own; a reinforcement writes that entry again,
// which is how an entry an earlier attempt lost is mended; a global
// memory, another project's and a contradiction's edge copy are elsewhere
// anyway).
func (x *Extractor) write(ctx context.Context, ref memory.SessionRef, reply Reply, shown map[string]bool, said string) (changes []events.Change, wrote bool, err error) {
	mems := reply.Memories
	if len(mems) > x.cfg.MaxMemories {
		mems = mems[:x.cfg.MaxMemories]
	}
	var nodes []memory.Node
	var props []ReplyMemory
	for _, m := range mems {
		if n, ok := toNode(m, ref, x.cfg.CrossProject); ok {
			if n.AssertedBy == memory.AssertedUser && !memory.Grounded(n.Label, said) {
				// A rule "the user stated" that shares no word with what
				// the user said is most likely copied from the prompt's
				// example, invented or taken from a tool's output: it must
				// not become a standing instruction.
				n.AssertedBy = memory.AssertedInferred
				n.Confidence = math.Min(n.Confidence, memory.UngroundedConfidence)
			}
			nodes = append(nodes, n)
			props = append(props, m)
		}
	}
	if len(nodes) == 0 {
		return nil, false, nil
	}
	var vecs [][]float32
	model := ""
	if x.emb != nil {
		texts := make([]string, len(nodes))
		for i := range nodes {
			texts[i] = memory.EmbedText(&nodes[i])
		}
		if v, err := x.emb.Embed(ctx, texts); err == nil && len(v) == len(nodes) {
			vecs, model = v, x.emb.Model()
		} else {
			x.Kick() // the backlog embedder retries
		}
	}
	var earlier []writtenMemory
	for i, n := range nodes {
		var vec []float32
		if vecs != nil {
			vec = vecs[i]
		}
		same, opposite := relations(props[i], shown)
		target := ""
		if len(same) > 0 {
			target = same[0]
		} else if vec != nil {
			best := x.cfg.SameCosine
			for _, e := range earlier {
				if c := cosine(vec, e.vec); e.vec != nil && c >= best {
					target, best = e.id, c
				}
			}
		}
		var res memory.UpsertResult
		var err error
		if target != "" {
			olds, gerr := x.store.GetMany(ctx, []string{target})
			if gerr != nil {
				return changes, wrote, fmt.Errorf("extract: load memory %s: %w", target, gerr)
			}
			if len(olds) == 1 {
				res, err = x.store.Upsert(ctx, reinforcement(olds[0], n))
			} else {
				target = ""
			}
		}
		if target == "" {
			if vec != nil {
				n.Embedding, n.EmbeddingModel = vec, model
			}
			res, err = x.store.Upsert(ctx, n)
		}
		if errors.Is(err, memory.ErrInvalid) {
			continue // a proposal the model got wrong; the others stand
		}
		if err != nil {
			return changes, wrote, fmt.Errorf("extract: write memory: %w", err)
		}
		wrote = true
		kind := events.ChangeReinforced
		if res.Created {
			kind = events.ChangeCreated
		}
		id := res.Node.ID
		changes = append(changes, events.Change{ID: id, Kind: kind})
		for _, opp := range opposite {
			if opp == id {
				continue
			}
			_, err := x.store.Link(ctx, memory.Edge{Src: id, Dst: opp, Relation: memory.Contradicts})
			if memory.IsNotFound(err) || errors.Is(err, memory.ErrInvalid) {
				continue
			}
			if err != nil {
				return changes, wrote, fmt.Errorf("extract: link contradiction: %w", err)
			}
			changes = append(changes, events.Change{ID: opp, Kind: events.ChangeLinked})
		}
		earlier = append(earlier, writtenMemory{id: id, vec: vec})
	}
	return changes, wrote, nil
}

func cosine(a, b []float32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// eventID derives a stable event id from a key (a redelivered span
// publishes the same id, which the stream's duplicate window drops).
func eventID(p memory.ProjectRef, key string) string {
	in := p.Project + "\x00" + key
	if p.Tenant != "" {
		in = p.Tenant + "\x00" + in // the default tenant's ids stay as they were
	}
	sum := sha256.Sum256([]byte(in))
	return "x" + hex.EncodeToString(sum[:])[:25]
}
