package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// LettersShown is how many dead letters the operations page lists.
const LettersShown = 100

var errOperator = errors.New("the operations pages are the operator's: the streams hold every tenant's events (log in with the admin token)")

// opsPage checks the operator and the bus; nil when refused (written).
func (s *Server) opsPage(w http.ResponseWriter, r *http.Request, ss *session, title string) *page {
	pg := &page{Title: title, Nav: "ops", P: ss.p, CSRF: ss.csrf, Flash: r.FormValue("flash")}
	pg.Scope, pg.Projects, _ = s.resolve(r.Context(), r, ss) // the selector's scope only: these pages show every tenant
	if !ss.p.Admin {
		s.fail(w, r, pg, http.StatusForbidden, errOperator)
		return nil
	}
	if s.ops == nil {
		s.fail(w, r, pg, http.StatusServiceUnavailable, errors.New("this process has no bus: the operations pages need NATS"))
		return nil
	}
	return pg
}

func (s *Server) handleOps(w http.ResponseWriter, r *http.Request, ss *session) {
	pg := s.opsPage(w, r, ss, "Operations")
	if pg == nil {
		return
	}
	ctx := r.Context()
	data := map[string]any{}
	state, err := s.ops.Inspect(ctx)
	if err != nil {
		data["InspectError"] = describe(err)
	} else {
		failed, degraded := state.Problems()
		data["State"], data["Failed"], data["Degraded"] = state, failed, degraded
	}
	data["Report"] = s.ops.Checks(ctx)
	from, _ := strconv.ParseUint(r.FormValue("from"), 10, 64)
	letters, err := s.ops.List(ctx, from, LettersShown+1)
	if err != nil {
		data["DLQError"] = describe(err)
	} else {
		if len(letters) > LettersShown {
			data["NextFrom"] = letters[LettersShown].DLQSequence
			letters = letters[:LettersShown]
		}
		data["Letters"] = letters
	}
	pg.Data = data
	s.render(w, r, "ops", pg)
}

func seqOf(r *http.Request) (uint64, error) {
	n, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%q is not a DLQ sequence number", r.PathValue("seq"))
	}
	return n, nil
}

func (s *Server) handleLetter(w http.ResponseWriter, r *http.Request, ss *session) {
	pg := s.opsPage(w, r, ss, "Dead letter")
	if pg == nil {
		return
	}
	seq, err := seqOf(r)
	if err != nil {
		s.fail(w, r, pg, http.StatusBadRequest, err)
		return
	}
	l, err := s.ops.Get(r.Context(), seq)
	if err != nil {
		s.fail(w, r, pg, http.StatusNotFound, err)
		return
	}
	body := string(l.Data)
	var pretty bytes.Buffer
	if json.Indent(&pretty, l.Data, "", "  ") == nil {
		body = pretty.String()
	}
	pg.Title = fmt.Sprintf("Dead letter %d", seq)
	pg.Data = map[string]any{"L": l, "Body": body}
	s.render(w, r, "letter", pg)
}

func (s *Server) letterAction(w http.ResponseWriter, r *http.Request, ss *session, verb string, do func(seq uint64) error) {
	pg := s.opsPage(w, r, ss, "Dead letter")
	if pg == nil {
		return
	}
	seq, err := seqOf(r)
	if err != nil {
		s.fail(w, r, pg, http.StatusBadRequest, err)
		return
	}
	if err := do(seq); err != nil {
		s.fail(w, r, pg, http.StatusConflict, err)
		return
	}
	s.log.Info("console: dead letter "+verb, principalField(ss.p), zapInt("seq", int(seq)))
	back(w, r, "/ops", fmt.Sprintf("Dead letter %d %s.", seq, verb))
}

func (s *Server) handleReplay(w http.ResponseWriter, r *http.Request, ss *session) {
	s.letterAction(w, r, ss, "replayed", func(seq uint64) error { return s.ops.Replay(r.Context(), seq) })
}

func (s *Server) handleDrop(w http.ResponseWriter, r *http.Request, ss *session) {
	s.letterAction(w, r, ss, "dropped", func(seq uint64) error { return s.ops.Delete(r.Context(), seq) })
}
