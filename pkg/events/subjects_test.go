package events_test

import (
	"errors"
	"strings"
	"testing"
	"unicode"

	"github.com/engram-memory/engram/pkg/events"
)

func TestEncodeToken(t *testing.T) {
	cases := map[string]string{
		"acme":          "acme",
		"Proj_1-a:b@c":  "Proj_1-a:b@c",
		"acme/web":      "acme%2Fweb",
		"chat 42":       "chat%2042",
		"a.b":           "a%2Eb",
		"*":             "%2A",
		">":             "%3E",
		"100%":          "100%25",
		"":              "%",
		"é":             "%C3%A9",
		"tab\there\n":   "tab%09here%0A",
		"$JS.API":       "%24JS%2EAPI",
		"%":             "%25",
		"x%2Fy":         "x%252Fy",
		"emoji🙂":        "emoji%F0%9F%99%82",
		"\x00nul":       "%00nul",
		"dots...":       "dots%2E%2E%2E",
		"UPPER-lower_9": "UPPER-lower_9",
	}
	for in, want := range cases {
		got := events.EncodeToken(in)
		if got != want {
			t.Errorf("EncodeToken(%q) = %q, want %q", in, got, want)
		}
		back, err := events.DecodeToken(got)
		if err != nil || back != in {
			t.Errorf("DecodeToken(%q) = %q, %v; want %q", got, back, err, in)
		}
	}
}

func TestDecodeTokenRejectsNonCanonical(t *testing.T) {
	for _, tok := range []string{"", "a%2fb" /* lower hex */, "%41" /* 'A' needs no escape */, "a%2", "a%", "%%", "a.b", "a b", "*", ">", "%G0"} {
		if _, err := events.DecodeToken(tok); !errors.Is(err, events.ErrInvalidSubject) {
			t.Errorf("DecodeToken(%q): err %v, want ErrInvalidSubject", tok, err)
		}
	}
}

func TestSubjects(t *testing.T) {
	s := events.Subjects{}
	if got := s.In(events.TypeTurnStarted, "", "acme/web", "chat 42"); got != "engram.in.turn_started.%.acme%2Fweb.chat%2042" {
		t.Fatalf("In = %q", got)
	}
	if got := s.In(events.TypeTurnStarted, "t 1", "p", "s"); got != "engram.in.turn_started.t%201.p.s" {
		t.Fatalf("In = %q", got)
	}
	if got := s.Out(events.TypeMemoryChanged, "", "p", ""); got != "engram.out.memory_changed.%.p" {
		t.Fatalf("Out = %q", got)
	}
	if got := s.Out(events.TypeInjectionReady, "t", "p", "s"); got != "engram.out.injection_ready.t.p.s" {
		t.Fatalf("Out = %q", got)
	}
	// The form before tenants reads as the default tenant's, marked.
	if a, err := s.Parse("engram.in.turn_ended.p.s"); err != nil || !a.Legacy || a.TenantID != "" || a.ProjectID != "p" || a.SessionID != "s" {
		t.Fatalf("legacy subject: %+v %v", a, err)
	}
	if a, err := s.Parse("engram.in.turn_ended.%.p.s"); err != nil || a.Legacy {
		t.Fatalf("new subject: %+v %v", a, err)
	}
	if got := s.DLQ("extractor"); got != "engram.dlq.extractor" {
		t.Fatalf("DLQ = %q", got)
	}
	c := events.Subjects{Prefix: "acme.engram"}
	if got := c.InType(events.TypeTurnEnded); got != "acme.engram.in.turn_ended.>" {
		t.Fatalf("InType = %q", got)
	}
	for _, e := range samples() {
		subj, err := c.For(e)
		if err != nil {
			t.Fatal(err)
		}
		a, err := c.Parse(subj)
		if err != nil {
			t.Fatalf("Parse(%q): %v", subj, err)
		}
		if a.Type != e.Type || a.TenantID != e.TenantID || a.ProjectID != e.ProjectID || a.SessionID != e.SessionID || a.Output != e.Type.IsOutput() {
			t.Fatalf("Parse(%q) = %+v, event %+v", subj, a, e.Ref())
		}
	}
	for _, bad := range []string{"other.in.turn_started.%.p.s", "acme.engram.in.turn_started.p", "acme.engram.in.nope.%.p.s",
		"acme.engram.out.turn_started.%.p", "acme.engram.in.turn_started.%.p.s.x", "acme.engram.in.turn_started.%.a%2fb.s", "acme.engram.up.x.y.z",
		"acme.engram.out.memory_changed.p"} {
		if _, err := c.Parse(bad); !errors.Is(err, events.ErrInvalidSubject) {
			t.Errorf("Parse(%q): err %v", bad, err)
		}
	}
	for _, p := range []string{"a b", "a..b", "a.*", ">", ".a"} {
		if err := events.ValidatePrefix(p); err == nil {
			t.Errorf("ValidatePrefix(%q) accepted", p)
		}
	}
}

// FuzzToken checks that every string round-trips through a valid token and
// that DecodeToken only accepts what EncodeToken produces.
func FuzzToken(f *testing.F) {
	for _, s := range []string{"", "acme", "acme/web", "a.b.c", "*", ">", "%", "%25", "chat 42", "é🙂", "\x00", "a%2Fb", "%41"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := events.EncodeToken(s)
		if tok == "" || strings.ContainsAny(tok, ".*> ") {
			t.Fatalf("EncodeToken(%q) = %q: not a valid token", s, tok)
		}
		for _, r := range tok {
			if unicode.IsSpace(r) || r > unicode.MaxASCII || !unicode.IsPrint(r) {
				t.Fatalf("EncodeToken(%q) = %q: holds %q", s, tok, r)
			}
		}
		back, err := events.DecodeToken(tok)
		if err != nil || back != s {
			t.Fatalf("DecodeToken(EncodeToken(%q)) = %q, %v", s, back, err)
		}
		// Read as a token: a decodable string is canonical.
		if d, err := events.DecodeToken(s); err == nil && events.EncodeToken(d) != s {
			t.Fatalf("DecodeToken(%q) = %q, which encodes to %q", s, d, events.EncodeToken(d))
		}
	})
}

func TestCurrentSubject(t *testing.T) {
	for in, want := range map[string]string{
		"engram.in.turn_ended.p.s":                "engram.in.turn_ended.%.p.s",
		"acme.mem.in.session_idle.a%2Fb.chat%201": "acme.mem.in.session_idle.%.a%2Fb.chat%201",
		"engram.in.turn_ended.%.p.s":              "engram.in.turn_ended.%.p.s",
		"engram.in.turn_ended.acme.p.s":           "engram.in.turn_ended.acme.p.s",
		"engram.in.turn_ended.in.turn_ended.s":    "engram.in.turn_ended.in.turn_ended.s",
		"engram.in.bogus.p.s":                     "engram.in.bogus.p.s",
		"engram.out.memory_changed.p.s":           "engram.out.memory_changed.p.s",
		"engram.in.turn_ended.a%2fb.s":            "engram.in.turn_ended.a%2fb.s", // not a canonical token
	} {
		if got := events.CurrentSubject(in); got != want {
			t.Errorf("CurrentSubject(%q) = %q, want %q", in, got, want)
		}
		if got := events.CurrentSubject(in); got != in {
			if a, err := (events.Subjects{Prefix: strings.TrimSuffix(in[:strings.Index(in, ".in.")], ".")}).Parse(got); err != nil || a.Legacy {
				t.Errorf("CurrentSubject(%q) = %q: parses as %+v, %v", in, got, a, err)
			}
		}
	}
}
