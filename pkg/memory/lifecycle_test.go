package memory

import (
	"errors"
	"testing"
	"time"
)

func TestPrepareRevision(t *testing.T) {
	old := mustPrepare(t, Node{Subkind: Decision, ProjectID: "p", Scope: ScopeProject, Label: "use sqlite",
		AssertedBy: AssertedAssistant, Reach: ReachAnywhere, Paths: []string{"db.go"}})
	n, err := PrepareRevision(old, Node{Label: "use postgres", AssertedBy: AssertedAssistant}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if n.Subkind != Decision || n.ProjectID != "p" || n.Reach != ReachAnywhere || len(n.Paths) != 1 || n.ID == "" || n.ID == old.ID {
		t.Fatalf("inherit: %+v", n)
	}
	if _, err := PrepareRevision(old, Node{Label: "USE  sqlite", AssertedBy: AssertedUser}, t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("same digest: %v", err)
	}
	if _, err := PrepareRevision(old, Node{Label: "use mysql"}, t0); !errors.Is(err, ErrRefused) {
		t.Fatalf("inferred revising assistant: %v", err)
	}
	closed := Close(old, n.ID, t0.Add(time.Hour))
	if closed.SupersededBy != n.ID || !closed.ValidTo.Equal(t0.Add(time.Hour)) || closed.Live() {
		t.Fatalf("close: %+v", closed)
	}
	if !AsOfVisible(&closed, Filter{ProjectID: "p"}, t0.Add(30*time.Minute)) || AsOfVisible(&closed, Filter{ProjectID: "p"}, t0.Add(time.Hour)) {
		t.Fatal("as-of")
	}
}

func TestPrepareMessages(t *testing.T) {
	msgs, err := PrepareMessages("t1", []Message{
		{Role: RoleUser, Content: "my password=hunter2"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "x", Arguments: `{"api_key": "abc"}`}}},
		{Role: RoleTool, ToolStatus: ToolFailed},
	}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if msgs[0].Content != "my password=[redacted]" || msgs[1].ToolCalls[0].Arguments != `{"api_key": "[redacted]"}` ||
		msgs[2].TurnID != "t1" || !msgs[2].CreatedAt.Equal(t0) {
		t.Fatalf("%+v", msgs)
	}
	if _, err := PrepareMessages("", []Message{{Role: "robot"}, {Role: RoleTool, ToolStatus: "meh"}}, t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid: %v", err)
	}
	if _, err := PrepareSummary(Summary{}, t0); !errors.Is(err, ErrInvalid) {
		t.Fatal("empty summary accepted")
	}
	if CheckTTL(0) == nil || CheckTTL(time.Second) != nil || CheckSession(SessionRef{}) == nil {
		t.Fatal("checks")
	}
	a := Archive(Node{}, t0)
	if a.ArchivedAt.IsZero() || !Archive(a, t0.Add(time.Hour)).ArchivedAt.Equal(t0) || !Restore(a, t0).ArchivedAt.IsZero() {
		t.Fatal("archive/restore")
	}
}
