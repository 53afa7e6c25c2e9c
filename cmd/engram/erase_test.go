package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/engram-memory/engram/internal/erase"
	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// TestMemoryEraseThroughServeAndAlone: with engram serve running, `engram
// memory erase` asks serve on the bus (the CLI cannot open the database
// serve holds) and prints serve's receipt; with serve stopped, the CLI
// erases by itself, opening the data dir's bus. Each time the erased
// user's memories, transcripts and events are gone, from the store's
// reads and from its file read raw, and the other user's are there. A
// platform's credentials may not ask for an erasure.
func TestMemoryEraseThroughServeAndAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the engram binary")
	}
	bin := buildEngram(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	seed := filepath.Join(t.TempDir(), "seed.jsonl")
	var lines []string
	for _, user := range []string{"user-1", "user-2"} {
		for i := range 3 {
			lines = append(lines, fmt.Sprintf(`{"type":"node","tenant_id":"acme","subkind":"preference","project_id":%q,"session_id":"chat","label":"%s likes colour number %d quietly","body":"memory body %s-%d"}`,
				user, user, i, user, i))
		}
	}
	if err := os.WriteFile(seed, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := func(env []string, args ...string) (string, string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(append(os.Environ(), "ENGRAM_DATA="+dataDir), env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), code
	}
	if out, errOut, code := cli(nil, "memory", "import", "-tenant", "acme", seed); code != 0 {
		t.Fatalf("import: %d %s %s", code, out, errOut)
	}

	s := startServe(t, bin, dataDir, nil)
	nc := s.connect(t, natsauth.RoleAdmin)
	js, _ := jetstream.New(nc)
	cl, err := events.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, user := range []string{"user-1", "user-2"} {
		ref := events.Ref{TenantID: "acme", ProjectID: user, SessionID: "chat", TurnID: "t1"}
		if _, err := cl.PublishTurnEnded(ctx, ref, events.TurnEnded{Messages: []events.Message{
			{Role: events.RoleUser, Content: "the words " + user + " said in confidence"},
			{Role: events.RoleAssistant, Content: "the answer " + user + " got back"}}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the transcripts to be stored", func() bool {
		c, err := js.Consumer(ctx, events.StreamIn, events.ConsumerTranscript)
		if err != nil {
			return false
		}
		ci, err := c.Info(ctx)
		return err == nil && ci.NumPending == 0 && ci.NumAckPending == 0 && ci.Delivered.Consumer >= 2
	})

	// A platform may not ask.
	platform := s.connect(t, natsauth.RolePlatform)
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = erase.Ask(rctx, platform, erase.Subject(""), erase.Request{Scope: memory.EraseScope{Tenant: "acme", Project: "user-2"}})
	rcancel()
	if err == nil {
		t.Fatal("the platform's credentials asked for an erasure and got a receipt")
	}

	// Through serve.
	out, errOut, code := cli(s.env(), "memory", "erase", "-tenant", "acme", "-project", "user-1", "-verify", "-json")
	if code != 0 {
		t.Fatalf("erase through serve: exit %d\n%s\n%s\n%s", code, out, errOut, s.logs())
	}
	var r erase.Receipt
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("receipt: %v\n%s", err, out)
	}
	if r.Store.Memories != 3 || r.Store.Messages != 2 || r.Store.Turns != 1 || r.Streams[events.StreamIn] < 1 ||
		r.Verify == nil || r.Verify.FoundCount != 0 || !r.Complete() {
		t.Fatalf("receipt through serve: %s", out)
	}
	if strings.Contains(s.logs(), "user-1") {
		t.Errorf("serve's log names the erased project:\n%s", s.logs())
	}
	// Invalid: a session without its project.
	if _, _, code := cli(s.env(), "memory", "erase", "-tenant", "acme", "-session", "chat"); code != 2 {
		t.Fatalf("erase of a session without a project: exit %d, want 2", code)
	}
	s.stop(t)

	st, err := sqlite.Open(ctx, filepath.Join(dataDir, "engram.db"))
	if err != nil {
		t.Fatal(err)
	}
	check := func(user string, erased bool) {
		t.Helper()
		msgs, err := st.Messages(ctx, memory.SessionRef{Tenant: "acme", Project: user, Session: "chat"}, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		tl, err := st.Timeline(ctx, memory.TimelineQuery{Filter: memory.Filter{TenantID: "acme", ProjectID: user, SessionID: "chat"}})
		if err != nil {
			t.Fatal(err)
		}
		if erased != (len(msgs) == 0 && len(tl) == 0) {
			t.Fatalf("%s (erased %v): %d messages, %d memories", user, erased, len(msgs), len(tl))
		}
	}
	check("user-1", true)
	check("user-2", false)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dataDir, "engram.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"user-1 likes colour", "the words user-1 said", "the answer user-1 got", "memory body user-1"} {
		if bytes.Contains(raw, []byte(text)) {
			t.Fatalf("%q is still in the database file", text)
		}
	}
	if !bytes.Contains(raw, []byte("user-2 likes colour")) {
		t.Fatal("the kept user's memory is not in the database file")
	}

	// Alone: serve is stopped, the CLI opens the data dir's bus itself.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := l.Addr().String()
	_ = l.Close()
	out, errOut, code = cli([]string{"ENGRAM_NATS_LISTEN=" + free}, "memory", "erase", "-tenant", "acme", "-project", "user-2", "-verify")
	if code != 0 {
		t.Fatalf("erase alone: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("the receipt:\n%s", out)
	for _, want := range []string{`erased tenant "acme" project "user-2" (project)`, "store: 3 memories", "2 transcript messages in 1 turns",
		"ENGRAM_IN 1", "verify: found nothing of the scope", "complete"} {
		if !strings.Contains(out, want) {
			t.Errorf("the receipt lacks %q:\n%s", want, out)
		}
	}
	st, err = sqlite.Open(ctx, filepath.Join(dataDir, "engram.db"))
	if err != nil {
		t.Fatal(err)
	}
	check("user-2", true)
	_ = st.Close()
}
