package memory

import (
	"strings"
	"testing"
)

// knownSecrets are realistic (fake) secrets of every recognised kind.
var knownSecrets = []string{
	"AKIAIOSFODNN7EXAMPLE",
	"ghp_1234567890abcdefghijklmnopqrstuvwxyzAB",
	"gho_abcdefghijklmnopqrstuvwxyz0123456789",
	"github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
	"glpat-abcdefghij0123456789",
	"xoxb-123456789012-1234567890123-abcdefghijklmnop",
	"sk-proj-abcdefghijklmnopqrstuvwxyz0123456789",
	"sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
	"sk_live_abcdefghijklmnop0123",
	"rk_test_abcdefghijklmnop0123",
	"AIzaSyA-abcdefghijklmnopqrstuvwxyz01234",
	"npm_abcdefghijklmnopqrstuvwxyz0123456789",
	"hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
	"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
	// kinds issue 23 found missed (fake, random characters in the right shape)
	"whsec_Q7vXk2LmP9rTz4WbN8cY1hJ3dF6gS0aE",
	"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",
	"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",
	"dop_v1_3c9f1a7e2b8d4f6a0c5e9b1d7f3a2c8e4b6d1f9a3c7e2b8d0f5a9c1e7b3d2f8a",
	"hvs.CAESIJ8kL2mN4pQ6rS8tU0vW2xY4zA6bC8dE",
	"AGE-SECRET-KEY-1QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE6MU",
	"dapi3c9f1a7e2b8d4f6a0c5e9b1d7f3a2c8e",
	"lin_api_Xk2LmP9rTz4WbN8cY1hJ3dF6gS0aEQ7vUo5iR2tK",
	"SK3c9f1a7e2b8d4f6a0c5e9b1d7f3a2c8e",
	"key-3c9f1a7e2b8d4f6a0c5e9b1d7f3a2c8e",
	"3c9f1a7e2b8d4f6a0c5e9b1d7f3a2c8e-us6",
	"4539 1488 0343 6467",
	"7345291846:AAH4kL9mQ2xV7pT3wZ8nR1cY6bJ5dF0gS2a",
}

func TestRedact(t *testing.T) {
	cases := []struct{ in, want string }{
		{"nothing secret here, tokens: 500", "nothing secret here, tokens: 500"},
		{"password=hunter2 and more", "password=[redacted] and more"},
		{`{"api_key": "abc123def", "user": "bob"}`, `{"api_key": "[redacted]", "user": "bob"}`},
		{"export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "export AWS_SECRET_ACCESS_KEY=[redacted]"},
		{"DB_PASSWORD: 's3cr3t pass'", "DB_PASSWORD: '[redacted]'"},
		{"client_secret := abc", "client_secret := [redacted]"},
		{"Authorization: Basic dXNlcjpwYXNz\nnext line", "Authorization: [redacted]\nnext line"},
		{"curl -H 'Authorization: Bearer abc.def.ghi' x", "curl -H 'Authorization: [redacted]"},
		{"use Bearer abcdefgh12345678 for it", "use Bearer [redacted] for it"},
		{"clone https://bob:pa55w0rd@github.com/x/y.git", "clone https://[redacted]@github.com/x/y.git"},
		{"postgres://app:secret@db:5432/app?sslmode=off", "postgres://[redacted]@db:5432/app?sslmode=off"},
		{"key AKIAIOSFODNN7EXAMPLE in env", "key [redacted] in env"},
		{"-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----\ntail", "[redacted]\ntail"},
		{"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1r", "[redacted]"},
		{"task-force-abcdefghijklmnopqrstuvwxyz is a name", "task-force-abcdefghijklmnopqrstuvwxyz is a name"},
		{"see https://example.com/path@v1 and user@example.com", "see https://example.com/path@v1 and user@example.com"},
	}
	for _, c := range cases {
		if got := Redact(c.in); got != c.want {
			t.Errorf("Redact(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
	for _, s := range knownSecrets {
		got := Redact("the key is " + s + " ok")
		if strings.Contains(got, s) || !strings.Contains(got, Redacted) {
			t.Errorf("secret %q survived: %q", s, got)
		}
	}
}

func FuzzRedact(f *testing.F) {
	f.Add("password=x", "", 0)
	f.Add("Authorization: Bearer", "tail", 3)
	f.Add("https://u:p@h/", "api_key: 'a b'", 7)
	f.Add("-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----", 12)
	f.Add("token=\"", "\"", 5)
	f.Add("", "", 13)
	f.Fuzz(func(t *testing.T, prefix, suffix string, k int) {
		for _, s := range []string{prefix, prefix + suffix} {
			once := Redact(s)
			if twice := Redact(once); twice != once {
				t.Fatalf("not idempotent:\n in    %q\n once  %q\n twice %q", s, once, twice)
			}
		}
		secret := knownSecrets[(k%len(knownSecrets)+len(knownSecrets))%len(knownSecrets)]
		in := prefix + " " + secret + " " + suffix
		out := Redact(in)
		if strings.Contains(out, secret) {
			t.Fatalf("secret survived: in %q out %q", in, out)
		}
		if Redact(out) != out {
			t.Fatalf("not idempotent on %q", in)
		}
	})
}
