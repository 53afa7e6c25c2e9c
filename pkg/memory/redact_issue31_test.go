package memory

import (
	"strings"
	"testing"

	"github.com/engram-memory/engram/pkg/memory/neutralisetest"
	"github.com/engram-memory/engram/pkg/memory/redacttest"
)

func TestRedactIssue31(t *testing.T) {
	for _, c := range redacttest.Issue31 {
		out := Redact(c.Text)
		if strings.Contains(out, c.Secret) || !strings.Contains(out, Redacted) {
			t.Errorf("%s: %q -> %q keeps the secret", c.Name, c.Text, out)
		}
		if again := Redact(out); again != out {
			t.Errorf("%s: not idempotent: %q -> %q", c.Name, out, again)
		}
	}
}

// What the new rules must leave alone: prose about passwords, in the same
// languages.
func TestRedactIssue31Ordinary(t *testing.T) {
	for _, s := range []string{
		"Mein Passwort ist abgelaufen.", "Das Passwort ist zu kurz.", "Le mot de passe est incorrect.", "Mi contraseña es demasiado corta.",
		"A senha é obrigatória.", "La password è scaduta.", "Mijn wachtwoord is verlopen.", "Мой пароль не подходит.", "密码是错误的。",
		"パスワードは変更されました。", "Kata sandi saya adalah rahasia.", "The API key is stored in the vault.", "my password is wrong",
		"machine learning models need a password reset page", "token: without one the request fails", "the token is valid for an hour",
		"users:\n- name: admin", "Passwort: siehe Tresor", "password saya lupa",
	} {
		if out := Redact(s); out != s {
			t.Errorf("ordinary %q -> %q", s, out)
		}
	}
}

// The ordinary text of eleven languages (the neutraliser's corpus) keeps
// its words under the new prose rules.
func TestRedactOrdinaryMultilingual(t *testing.T) {
	lines := neutralisetest.Ordinary()
	altered := 0
	for _, l := range lines {
		if out := Redact(l); out != l {
			altered++
			t.Logf("altered: %q -> %q", l, out)
		}
	}
	t.Logf("multilingual ordinary corpus: %d/%d lines altered by Redact", altered, len(lines))
	if altered*100 > len(lines) {
		t.Errorf("%d of %d lines altered, want at most 1%%", altered, len(lines))
	}
}
