package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/engram-memory/engram/internal/inject"
	"github.com/engram-memory/engram/pkg/memory"
)

// Bounds of the session pages.
const (
	SessionsShown = 200  // sessions listed
	MaxMessages   = 5000 // messages a session's page reads
	TurnsShown    = 100  // the most recent turns shown
)

func (s *Server) handleSessions(w http.ResponseWriter, r *http.Request, ss *session) {
	pg := s.base(w, r, ss, "sessions", "Sessions")
	if pg == nil {
		return
	}
	data := map[string]any{}
	if d, ok := s.st.(memory.Directory); ok {
		list, err := d.SessionList(r.Context(), pg.Scope.ref(), SessionsShown)
		if err != nil {
			s.fail(w, r, pg, 0, err)
			return
		}
		data["Sessions"], data["Listed"] = list, true
	} else {
		ids, err := s.st.SessionIDs(r.Context(), pg.Scope.ref())
		if err != nil {
			s.fail(w, r, pg, 0, err)
			return
		}
		list := make([]memory.SessionInfo, 0, min(len(ids), SessionsShown))
		for _, id := range ids[:min(len(ids), SessionsShown)] {
			list = append(list, memory.SessionInfo{Session: id})
		}
		data["Sessions"], data["Listed"], data["IDsOnly"] = list, true, true
	}
	pg.Data = data
	s.render(w, r, "sessions", pg)
}

// turnView is one turn of a session: its messages, the block injected
// into it and why each line is there.
type turnView struct {
	ID        string
	Messages  []memory.Message
	Injection *memory.Injection
	Lines     []lineView
	NoRecord  string           // why there is no injection record
	Why       *memory.BlockWhy // as recorded with the block; nil for a record that keeps none
	Policy    string           // the block policy's numbers in words
	Cut       []cutView        // the ranked candidates the policy left out
}

// lineView is one memory of a turn's block.
type lineView struct {
	ID       string
	Score    float64
	HasScore bool
	Node     *memory.Node // nil when it no longer exists or is not visible
	Standing bool
	// From the recorded explanation (empty without one):
	Rule     string        // the rule that admitted it (inject.Rule*)
	RuleText string        // in words
	Why      *memory.Why   // how retrieval scored it (nil for a standing instruction)
	Channels []channelView // each channel that found it
	Prior    string        // the prior in words
}

// channelView is one channel's part of a line's score.
type channelView struct {
	memory.ChannelWhy
	Text string // inject.ChannelText
}

// cutView is a candidate the block policy cut.
type cutView struct {
	memory.CutWhy
	Text string       // the rule in words
	Node *memory.Node // nil when it no longer exists or is not visible
}

// explainTurn fills t's explanation from its record's (the record is
// what the injector answered the turn with: nothing is recomputed).
func explainTurn(t *turnView) {
	why := t.Injection.Why
	if why == nil {
		return
	}
	t.Why = why
	t.Policy = fmt.Sprintf("relative floor %.2f × best %.3f = %.3f · ceiling %d recalled lines · plateau keeps %d",
		why.RelativeFloor, why.Best, why.Floor, why.MaxRecalled, why.PlateauKeep)
	byID := make(map[string]memory.LineWhy, len(why.Lines))
	for _, l := range why.Lines {
		byID[l.ID] = l
	}
	for i := range t.Lines {
		l := &t.Lines[i]
		lw, ok := byID[l.ID]
		if !ok {
			continue
		}
		l.Rule, l.Why = lw.Rule, lw.Why
		score := l.Score
		if lw.Why != nil {
			score = lw.Why.Score
			for _, c := range lw.Why.Channels {
				l.Channels = append(l.Channels, channelView{ChannelWhy: c, Text: inject.ChannelText(c)})
			}
			l.Prior = inject.PriorText(lw.Why.Prior)
			if lw.Why.Foreign {
				l.Prior += fmt.Sprintf(" × %.2f (another project's)", memory.ForeignFactor)
			}
		}
		l.RuleText = inject.RuleText(lw.Rule, score, why)
	}
	for _, c := range why.Cut {
		t.Cut = append(t.Cut, cutView{CutWhy: c, Text: inject.RuleText(c.Rule, c.Score, why)})
	}
}

// summaryView is one compaction summary with the messages it covers.
type summaryView struct {
	S        memory.Summary
	From, To int64 // the message ids it covers (From: after the previous summary)
	Messages int   // how many of them are stored
}

func (s *Server) sessionView(ctx context.Context, sc scope, p principal, id string) (map[string]any, error) {
	ref := memory.SessionRef{Tenant: sc.Tenant, Project: sc.Project, Session: id}
	if err := memory.CheckSession(ref); err != nil {
		return nil, err
	}
	msgs, err := s.st.Messages(ctx, ref, 0, MaxMessages)
	if err != nil {
		return nil, err
	}
	var turns []*turnView
	byID := map[string]*turnView{}
	for _, m := range msgs {
		t, ok := byID[m.TurnID]
		if !ok {
			t = &turnView{ID: m.TurnID}
			byID[m.TurnID] = t
			turns = append(turns, t)
		}
		t.Messages = append(t.Messages, m)
	}
	cut := 0
	if len(turns) > TurnsShown {
		cut = len(turns) - TurnsShown
		turns = turns[cut:]
	}
	c := sc.caller(p)
	c.Session = id
	loaded := map[string]*memory.Node{} // the cut candidates, read once for the page
	for _, t := range turns {
		in, err := s.st.GetInjection(ctx, ref, t.ID)
		switch {
		case memory.IsNotFound(err):
			t.NoRecord = "no injection record: the turn had no block, or its record expired"
			continue
		case err != nil:
			return nil, err
		}
		t.Injection = &in
		for i, mid := range in.IDs {
			l := lineView{ID: mid}
			if i < len(in.Scores) {
				l.Score, l.HasScore = in.Scores[i], true
			}
			if n, err := s.tool.Load(ctx, c, mid, false); err == nil {
				l.Node = &n
				l.Standing = memory.IsStanding(&n)
			} else if !memory.IsNotFound(err) {
				return nil, err
			}
			t.Lines = append(t.Lines, l)
		}
		explainTurn(t)
		for i := range t.Cut {
			n, ok := loaded[t.Cut[i].ID]
			if !ok {
				// A record's ids are data: one that is not an id is shown
				// as not visible, never fails the page.
				if got, err := s.tool.Load(ctx, c, t.Cut[i].ID, false); err == nil {
					n = &got
				} else if !memory.IsNotFound(err) && !errors.Is(err, memory.ErrInvalid) {
					return nil, err
				}
				loaded[t.Cut[i].ID] = n
			}
			t.Cut[i].Node = n
		}
	}
	var sums []summaryView
	all, err := s.st.Summaries(ctx, ref)
	if err != nil {
		return nil, err
	}
	var prev int64
	for _, sum := range all {
		v := summaryView{S: sum, From: prev + 1, To: sum.UpTo}
		for _, m := range msgs {
			if m.ID >= v.From && m.ID <= v.To {
				v.Messages++
			}
		}
		sums = append(sums, v)
		prev = sum.UpTo
	}
	cursor, err := s.st.Cursor(ctx, ref)
	if err != nil {
		return nil, err
	}
	note := ""
	if cut > 0 {
		note = fmt.Sprintf("the %d most recent turns of %d", TurnsShown, cut+TurnsShown)
	}
	if len(msgs) == MaxMessages {
		note = strings.TrimPrefix(note+fmt.Sprintf("; only the first %d messages were read", MaxMessages), "; ")
	}
	return map[string]any{"Session": id, "Turns": turns, "Summaries": sums, "Cursor": cursor, "Note": note}, nil
}

func (s *Server) handleSession(w http.ResponseWriter, r *http.Request, ss *session) {
	pg := s.base(w, r, ss, "sessions", "Session")
	if pg == nil {
		return
	}
	id := strings.TrimSpace(r.FormValue("s"))
	v, err := s.sessionView(r.Context(), pg.Scope, ss.p, id)
	if err != nil {
		s.fail(w, r, pg, 0, err)
		return
	}
	pg.Title = "Session " + id
	pg.Data = v
	s.render(w, r, "session", pg)
}
