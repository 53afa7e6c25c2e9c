package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/engram-memory/engram/pkg/memory"
)

// EraseScope is what an erasure removes: a tenant's, a project's or a
// session's everything.
type EraseScope struct {
	Tenant  string
	Project string // "" : the whole tenant
	Session string // "" : the whole project
}

func (e EraseScope) String() string {
	parts := []string{"tenant " + quoteTenant(e.Tenant)}
	if e.Project != "" {
		parts = append(parts, "project "+e.Project)
	}
	if e.Session != "" {
		parts = append(parts, "session "+e.Session)
	}
	return strings.Join(parts, ", ")
}

func quoteTenant(t string) string {
	if t == "" {
		return "(default)"
	}
	return t
}

// Receipt is what an erasure reports: the counts per kind of record, the
// time and the scope.
type Receipt struct {
	Scope  EraseScope
	At     time.Time
	Counts []Count
	Notes  []string
	// Complete: nothing was left undone and the verification found
	// nothing of the scope.
	Complete bool
	// Text is the eraser's own receipt, shown whole.
	Text string
}

// Count is how many records of one kind were erased.
type Count struct {
	Kind string
	N    int64
}

// Eraser erases a scope completely (the erase package's, adapted in
// consolefx).
type Eraser interface {
	Erase(ctx context.Context, s EraseScope) (Receipt, error)
}

// eraseScope reads the form's scope against the principal: a token erases
// only in its tenant and only a project it reaches (a whole tenant: a
// token of every project, *); the operator erases anything.
func eraseScope(r *http.Request, p principal) (EraseScope, error) {
	sc := EraseScope{Tenant: p.Grant.Tenant, Project: strings.TrimSpace(r.FormValue("p")), Session: strings.TrimSpace(r.FormValue("session"))}
	if p.Admin {
		sc.Tenant = strings.TrimSpace(r.FormValue("t"))
	}
	if err := memory.CheckTenant(sc.Tenant); err != nil {
		return sc, err
	}
	switch {
	case sc.Session != "" && sc.Project == "":
		return sc, fmt.Errorf("%w: a session is erased within its project: name the project", memory.ErrInvalid)
	case sc.Project == "" && !p.Admin && !p.Grant.All:
		return sc, fmt.Errorf("%w: erasing the whole tenant needs a token of every project (*)", errForbidden)
	case sc.Project != "" && !p.reaches(sc.Tenant, sc.Project):
		return sc, errForbidden
	}
	return sc, nil
}

func (s *Server) handleErasePage(w http.ResponseWriter, r *http.Request, ss *session) {
	pg := &page{Title: "Erase", Nav: "erase", P: ss.p, CSRF: ss.csrf, Flash: r.FormValue("flash")}
	sc, projects, err := s.resolve(r.Context(), r, ss)
	if err != nil && !errors.Is(err, errNoProject) {
		s.fail(w, r, pg, 0, err)
		return
	}
	pg.Scope, pg.Projects = sc, projects
	pg.Data = map[string]any{"Available": s.eraser != nil, "Session": r.FormValue("session")}
	s.render(w, r, "erase", pg)
}

// handleErase erases after the confirmation: the form repeats the scope
// in words ("erase <scope>"), typed by the person.
func (s *Server) handleErase(w http.ResponseWriter, r *http.Request, ss *session) {
	pg := &page{Title: "Erase", Nav: "erase", P: ss.p, CSRF: ss.csrf}
	pg.Scope, pg.Projects, _ = s.resolve(r.Context(), r, ss) // the selector's; the erasure's scope is read below
	if s.eraser == nil {
		s.fail(w, r, pg, http.StatusServiceUnavailable, errors.New("erasure is not available in this build"))
		return
	}
	sc, err := eraseScope(r, ss.p)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, errForbidden) {
			status = http.StatusForbidden
		}
		s.fail(w, r, pg, status, err)
		return
	}
	if want := confirmation(sc); strings.TrimSpace(r.PostFormValue("confirm")) != want {
		s.fail(w, r, pg, http.StatusBadRequest, fmt.Errorf("%w: type %q to confirm", memory.ErrInvalid, want))
		return
	}
	rc, err := s.eraser.Erase(r.Context(), sc)
	if err != nil {
		s.fail(w, r, pg, 0, err)
		return
	}
	s.log.Info("console: erased", principalField(ss.p), zapString("scope", sc.String()))
	pg.Data = map[string]any{"Receipt": rc}
	s.render(w, r, "receipt", pg)
}

// confirmation is what a person types to confirm an erasure.
func confirmation(sc EraseScope) string {
	switch {
	case sc.Session != "":
		return "erase session " + sc.Session
	case sc.Project != "":
		return "erase project " + sc.Project
	}
	return "erase tenant " + quoteTenant(sc.Tenant)
}
