package memory_test

import (
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/memory"
)

// A probe of 2026-12-06 sent 34 secrets of its own through engram serve
// (transcripts, tool-call arguments, tool results, turn_started text,
// consolidation and compaction with the demo model) and read the SQLite
// file and its WAL raw: 15 were stored in clear. These are the ones of
// forms the redaction claims (credential assignments, passwords in prose,
// keys after their name, files like .netrc); the others were passwords in
// languages outside its list (tr, pl, sv, vi, ar, hi).
func TestProbeRedactsClaimedForms(t *testing.T) {
	t.Skip("probe: reproduces 8 secrets of claimed forms stored in clear; fix pending")
	for _, c := range []struct{ text, secret string }{
		{"pass=Hunter2Hunter2x", "Hunter2Hunter2x"},     // an assignment whose name is "pass"
		{"PASSWORD Hunter2Hunter2Y", "Hunter2Hunter2Y"}, // the name, a space, the value
		{"twilio auth token 5f4dcc3b5aa765d61d8327deb882cf99", "5f4dcc3b5aa765d61d8327deb882cf99"},
		{"wallet private key 4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318", "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"},
		{"the wifi password is correct horse battery staple", "correct horse battery staple"},
		{"my seed phrase is abandon ability able about above absent absorb abstract absurd abuse access accident", "abandon ability able about above absent"},
		{"db.example:5432:prod:admin:Pgp4ssWord77x", "Pgp4ssWord77x"}, // a .pgpass line
		{"my 2FA backup codes are 8391-2274 5521-9087 7712-3345", "8391-2274"},
	} {
		if got := memory.Redact(c.text); strings.Contains(got, c.secret) {
			t.Errorf("Redact(%q) = %q keeps %q", c.text, got, c.secret)
		}
	}
}
