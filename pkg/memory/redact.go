package memory

import (
	"regexp"
	"slices"
	"strings"
)

// Redacted replaces every secret Redact finds.
const Redacted = "[redacted]"

type redaction struct {
	re   *regexp.Regexp
	repl string // expansion template; "" means Redacted
	// hints: the rule can only match text whose lower-cased form contains
	// one of them (a cheap test before the regular expression).
	hints []string
}

// The rules, applied in order. Each keeps what identifies the secret's role
// (a header or variable name, a URL's scheme and host) and replaces only the
// secret itself.
var redactions = []redaction{
	// PEM private key blocks (RSA, EC, OPENSSH, ENCRYPTED, PGP ...); an
	// unterminated block is redacted to the end of the text.
	{hints: []string{"-----begin"}, re: regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)`)},
	// Authorization / Proxy-Authorization headers: the rest of the line.
	{hints: []string{"authorization"}, re: regexp.MustCompile(`(?i)\b((?:proxy-)?authorization)(["']?[ \t]*[:=][ \t]*)[^\r\n]*[^\s\r\n]`), repl: "${1}${2}" + Redacted},
	// Bearer tokens anywhere.
	{hints: []string{"bearer"}, re: regexp.MustCompile(`(?i)\b(bearer)[ \t]+[A-Za-z0-9\-._~+/]{8,}=*`), repl: "${1} " + Redacted},
	// Credentials inside URLs: scheme://user:password@host.
	{hints: []string{"://"}, re: regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/?#@:]+:[^\s/?#@]+@`), repl: "${1}" + Redacted + "@"},
	// JSON Web Tokens.
	{hints: []string{"eyj"}, re: regexp.MustCompile(`\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}`)},
	// Well-known vendor key formats.
	{hints: []string{"akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa", "abia", "acca"}, re: regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA|ABIA|ACCA)[A-Z0-9]{16}\b`)}, // AWS access key id
	{hints: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, re: regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{30,}`)},                                                                                  // GitHub tokens
	{hints: []string{"github_pat_"}, re: regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{22,}`)},                                                                                                         // GitHub fine-grained
	{hints: []string{"glpat-"}, re: regexp.MustCompile(`\bglpat-[A-Za-z0-9_\-]{20,}`)},                                                                                                                 // GitLab
	{hints: []string{"xox"}, re: regexp.MustCompile(`\bxox[abposre]-[A-Za-z0-9\-]{10,}`)},                                                                                                              // Slack tokens
	{hints: []string{"hooks.slack.com"}, re: regexp.MustCompile(`https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+`)},                                                                                // Slack webhooks
	{hints: []string{"_live_", "_test_"}, re: regexp.MustCompile(`\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}`)},                                                                                        // Stripe secret/restricted
	{hints: []string{"sk-"}, re: regexp.MustCompile(`\bsk-[A-Za-z0-9_\-]{20,}`)},                                                                                                                       // OpenAI, Anthropic (sk-ant-)
	{hints: []string{"aiza"}, re: regexp.MustCompile(`\bAIza[0-9A-Za-z_\-]{35}`)},                                                                                                                      // Google API key
	{hints: []string{"ya29."}, re: regexp.MustCompile(`\bya29\.[0-9A-Za-z_\-]{20,}`)},                                                                                                                  // Google OAuth access token
	{hints: []string{"npm_"}, re: regexp.MustCompile(`\bnpm_[A-Za-z0-9]{36}\b`)},                                                                                                                       // npm
	{hints: []string{"hf_"}, re: regexp.MustCompile(`\bhf_[A-Za-z0-9]{30,}`)},                                                                                                                          // Hugging Face
	{hints: []string{"sg."}, re: regexp.MustCompile(`\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}`)},                                                                                                 // SendGrid
	{hints: []string{"pypi-"}, re: regexp.MustCompile(`\bpypi-[A-Za-z0-9_\-]{50,}`)},                                                                                                                   // PyPI
	// Credential assignments: keep the name, replace the value (quoted or
	// up to the next space or separator).
	{hints: []string{"pass", "pwd", "secret", "key", "token", "credential"}, re: regexp.MustCompile(`(?i)\b([A-Za-z0-9_.\-]*(?:password|passwd|passphrase|pwd|secret|api[_\-]?key|apikey|access[_\-]?key|secret[_\-]?key|private[_\-]?key|access[_\-]?token|auth[_\-]?token|refresh[_\-]?token|session[_\-]?token|id[_\-]?token|token|client[_\-]?secret|credentials?))(["']?[ \t]*(?::=|=>|[:=])[ \t]*)("[^"\r\n]*"|'[^'\r\n]*'|[^\s"',;&]+)`),
		repl: "${1}${2}" + "\x00"},
}

// Redact replaces the secrets found in s with "[redacted]": private key
// blocks, Authorization headers, bearer tokens, credential assignments
// (password=..., "api_key": "...": the name stays, the value goes),
// well-known vendor key formats (AWS, GitHub, GitLab, Slack, Stripe, OpenAI,
// Anthropic, Google, npm, Hugging Face, SendGrid, PyPI), JWTs and credentials
// inside URLs. It is idempotent: Redact(Redact(s)) == Redact(s). Every backend
// applies it to label and body on every write.
func Redact(s string) string {
	for range 4 { // until nothing changes; one pass almost always suffices
		out := redactOnce(s)
		if out == s {
			return out
		}
		s = out
	}
	return s
}

func redactOnce(s string) string {
	lower := strings.ToLower(s)
	for _, r := range redactions {
		if !slices.ContainsFunc(r.hints, func(h string) bool { return strings.Contains(lower, h) }) || !r.re.MatchString(s) {
			continue
		}
		switch {
		case r.repl == "":
			s = r.re.ReplaceAllLiteralString(s, Redacted)
		case strings.HasSuffix(r.repl, "\x00"):
			// assignment: keep the quotes around a quoted value
			s = r.re.ReplaceAllStringFunc(s, func(m string) string {
				sub := r.re.FindStringSubmatch(m)
				val := sub[3]
				q := ""
				if len(val) >= 2 && (val[0] == '"' || val[0] == '\'') {
					q = val[:1]
				}
				return sub[1] + sub[2] + q + Redacted + q
			})
		default:
			s = r.re.ReplaceAllString(s, r.repl)
		}
	}
	return s
}
