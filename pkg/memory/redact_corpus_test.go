package memory

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A corpus of secrets: each kind has a generator of a fake secret in its real
// shape (random characters from a seeded source, never a real secret) and
// the contexts it is seen in. The 30 kinds issue 23 found missed are marked.
type secretKind struct {
	kind     string
	missed   bool // one of the 30 misses of issue 23
	secret   func(r *rand.Rand) string
	contexts []string // %s is the secret
}

const (
	alnum   = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	hexd    = "0123456789abcdef"
	lowerAN = "abcdefghijklmnopqrstuvwxyz0123456789"
	upperAN = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b64     = alnum + "+/"
	url64   = alnum + "-_"
	digits  = "0123456789"
	bech32  = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
	pwChars = alnum + "!#%^*_-"
)

func rnd(set string, n int) func(*rand.Rand) string {
	return func(r *rand.Rand) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = set[r.IntN(len(set))]
		}
		return string(b)
	}
}

func pre(prefix string, parts ...func(*rand.Rand) string) func(*rand.Rand) string {
	return func(r *rand.Rand) string {
		s := prefix
		for _, p := range parts {
			s += p(r)
		}
		return s
	}
}

func lit(s string) func(*rand.Rand) string { return func(*rand.Rand) string { return s } }

// card makes a Luhn-valid number with the given prefix and length, grouped
// as printed on the card.
func card(prefix string, n int) func(*rand.Rand) string {
	return func(r *rand.Rand) string {
		d := []byte(prefix)
		for len(d) < n-1 {
			d = append(d, digits[r.IntN(10)])
		}
		for c := byte('0'); c <= '9'; c++ {
			if luhnCard(string(append(d, c)), false, "") {
				d = append(d, c)
				break
			}
		}
		if n == 15 { // Amex: 4-6-5
			return string(d[:4]) + " " + string(d[4:10]) + " " + string(d[10:])
		}
		var b strings.Builder
		for i, c := range d {
			if i > 0 && i%4 == 0 {
				b.WriteByte(' ')
			}
			b.WriteByte(c)
		}
		return b.String()
	}
}

var secretKinds = []secretKind{
	// the 30 misses of issue 23
	{"aws-configure-set", true, rnd(b64, 40), []string{"aws configure set aws_secret_access_key %s", "run: aws configure set aws_secret_access_key %s --profile prod"}},
	{"stripe-webhook", true, pre("whsec_", rnd(alnum, 32)), []string{"STRIPE_WEBHOOK_SECRET=%s", "the signing secret is %s"}},
	{"google-oauth-secret", true, pre("GOCSPX-", rnd(url64, 28)), []string{`{"web":{"client_id":"123-abc.apps.googleusercontent.com","client_secret":"%s"}}`, "use %s for the consent screen"}},
	{"redis-url-empty-user", true, rnd(alnum, 24), []string{"ENGRAM_REDIS_URL=redis://:%s@cache.internal:6379/0", "connect with redis-cli -u redis://:%s@10.0.0.5:6379"}},
	{"db-pass", true, rnd(pwChars, 14), []string{"DB_PASS=%s", "export DB_PASS=%s"}},
	{"secret-key-base", true, rnd(hexd, 64), []string{"SECRET_KEY_BASE=%s", "export SECRET_KEY_BASE=%s"}},
	{"database-password-prod", true, rnd(pwChars, 16), []string{"DATABASE_PASSWORD_PROD=%s", "DATABASE_PASSWORD_PROD: %s"}},
	{"github-token-rw", true, rnd(alnum, 36), []string{"GITHUB_TOKEN_RW=%s", "GITHUB_TOKEN_RW='%s'"}},
	{"azure-account-key", true, pre("", rnd(b64, 86), lit("==")), []string{"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=%s;EndpointSuffix=core.windows.net", "AccountKey=%s"}},
	{"azure-sas-sig", true, pre("", rnd(alnum, 43), lit("%3D")), []string{"https://acme.blob.core.windows.net/c/f.txt?sv=2022-11-02&ss=b&srt=o&sp=r&se=2026-12-01T00:00:00Z&sig=%s", "SAS: ?sp=racwdl&st=2026-01-01&sig=%s"}},
	{"twilio-api-key", true, pre("SK", rnd(hexd, 32)), []string{"TWILIO_API_KEY_SID %s", "twilio key %s"}},
	{"mailgun-key", true, pre("key-", rnd(hexd, 32)), []string{"mailgun: %s", "curl --user 'api:%s' https://api.mailgun.net/v3/x"}},
	{"mailchimp-key", true, pre("", rnd(hexd, 32), lit("-us6")), []string{"MC key %s", "apikey %s for the newsletter"}},
	{"card-visa", true, card("4", 16), []string{"card: %s exp 12/29", "pay with %s please"}},
	{"card-mastercard", true, card("53", 16), []string{"mastercard %s", "my card number is %s"}},
	{"card-amex", true, card("37", 15), []string{"amex %s cvv 1234", "charge %s"}},
	{"docker-auth", true, rnd(b64, 40), []string{`{"auths":{"registry.acme.io":{"auth":"%s"}}}`, `"auth": "%s"`}},
	{"discord-bot", true, pre("", func(r *rand.Rand) string { return "MT" + rnd(alnum, 24)(r) }, lit("."), rnd(url64, 6), lit("."), rnd(url64, 38)), []string{"bot.run('%s')", "DISCORD token %s"}},
	{"telegram-bot", true, pre("", rnd(digits, 10), lit(":AA"), rnd(url64, 33)), []string{"bot = Bot(token='%s')", "https://api.telegram.org/bot%s/getMe"}},
	{"shopify", true, pre("shpat_", rnd(hexd, 32)), []string{"X-Shopify-Access-Token: %s", "shop token %s"}},
	{"digitalocean", true, pre("dop_v1_", rnd(hexd, 64)), []string{"doctl auth init -t %s", "DO %s"}},
	{"vault", true, pre("hvs.", rnd(url64, 24)), []string{"VAULT_TOKEN=%s", "vault login %s"}},
	{"age", true, pre("AGE-SECRET-KEY-1", rnd(bech32, 58)), []string{"# created: 2026-01-01\n%s", "age key %s"}},
	{"sshpass", true, rnd(pwChars, 12), []string{"sshpass -p '%s' ssh root@10.0.0.7", "sshpass -p %s scp a b:"}},
	{"mysql-p", true, rnd(pwChars, 12), []string{"mysql -u root -p%s -h db app", "mysqldump -uadmin -p'%s' app > dump.sql"}},
	{"curl-u", true, rnd(pwChars, 14), []string{"curl -u admin:%s https://ci.acme.io/api", "curl --user deploy:%s -X POST https://x/y"}},
	{"prose-password", true, rnd(pwChars, 10), []string{"my password is %s", "btw the wifi password is %s, don't share it"}},
	{"databricks", true, pre("dapi", rnd(hexd, 32)), []string{"DATABRICKS_TOKEN %s", "token: %s"}},
	{"linear", true, pre("lin_api_", rnd(alnum, 40)), []string{"LINEAR %s", "linear key %s"}},
	{"atlassian", true, pre("ATATT3xFfGF0", rnd(url64, 60), lit("=1A2B3C4D")), []string{"jira api token %s", "curl -H 'X-Token %s'"}},
	// the kinds caught before, and more from gitleaks' rule set
	{"aws-access-key-id", false, pre("AKIA", rnd(upperAN, 16)), []string{"aws_access_key_id = %s", "key %s"}},
	{"aws-secret-env", false, rnd(b64, 40), []string{"AWS_SECRET_ACCESS_KEY=%s"}},
	{"github-pat", false, pre("ghp_", rnd(alnum, 36)), []string{"git clone https://%s@github.com/acme/x", "token %s"}},
	{"github-fine-grained", false, pre("github_pat_11", rnd(upperAN, 20), lit("_"), rnd(alnum, 59)), []string{"GH_TOKEN=%s"}},
	{"gitlab", false, pre("glpat-", rnd(url64, 20)), []string{"glab auth login --token %s"}},
	{"slack-bot", false, pre("xoxb-", rnd(digits, 12), lit("-"), rnd(digits, 13), lit("-"), rnd(alnum, 24)), []string{"SLACK_BOT_TOKEN=%s"}},
	{"slack-webhook", false, pre("https://hooks.slack.com/services/T", rnd(upperAN, 8), lit("/B"), rnd(upperAN, 8), lit("/"), rnd(alnum, 24)), []string{"webhook: %s"}},
	{"stripe-live", false, pre("sk_live_", rnd(alnum, 24)), []string{"Stripe.api_key = '%s'", "stripe %s"}},
	{"openai", false, pre("sk-proj-", rnd(url64, 48)), []string{"OPENAI_API_KEY=%s", "client = OpenAI(api_key=\"%s\")"}},
	{"anthropic", false, pre("sk-ant-api03-", rnd(url64, 93), lit("AA")), []string{"x-api-key: %s"}},
	{"google-api", false, pre("AIza", rnd(url64, 35)), []string{"https://maps.googleapis.com/maps/api/js?key=%s"}},
	{"google-oauth-access", false, pre("ya29.a0", rnd(url64, 60)), []string{"access token %s"}},
	{"npm", false, pre("npm_", rnd(alnum, 36)), []string{"//registry.npmjs.org/:_authToken=%s"}},
	{"huggingface", false, pre("hf_", rnd(alnum, 34)), []string{"huggingface-cli login --token %s"}},
	{"sendgrid", false, pre("SG.", rnd(url64, 22), lit("."), rnd(url64, 43)), []string{"SENDGRID_API_KEY=%s"}},
	{"pypi", false, pre("pypi-AgEIcHlwaS5vcmc", rnd(url64, 60)), []string{"password = %s"}},
	{"jwt", false, pre("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ", rnd(url64, 40), lit("."), rnd(url64, 43)), []string{"cookie: session=%s"}},
	{"private-key", false, pre("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA", rnd(b64, 60), lit("\n"), rnd(b64, 64), lit("\n-----END RSA PRIVATE KEY-----")), []string{"key file:\n%s\nend"}},
	{"openssh-key", false, pre("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA", rnd(b64, 64), lit("\n-----END OPENSSH PRIVATE KEY-----")), []string{"%s"}},
	{"authorization-basic", false, rnd(b64, 28), []string{"Authorization: Basic %s"}},
	{"bearer", false, rnd(url64, 40), []string{"curl -H \"Authorization: Bearer %s\" https://api.acme.io", "use Bearer %s"}},
	{"postgres-url", false, rnd(alnum, 16), []string{"DATABASE_URL=postgres://app:%s@db.internal:5432/app"}},
	{"nats-url", false, rnd(alnum, 20), []string{"nats://admin:%s@nats.internal:4222"}},
	{"password-assign", false, rnd(pwChars, 12), []string{"password=%s", `{"password": "%s"}`}},
	{"client-secret-yaml", false, rnd(url64, 32), []string{"  client_secret: %s"}},
	{"cli-password-flag", false, rnd(pwChars, 12), []string{"docker login -u bob --password %s registry.acme.io", "psql --password=%s"}},
	{"docker-login-p", false, rnd(pwChars, 12), []string{"docker login -u bob -p %s registry.acme.io"}},
	{"doppler", false, pre("dp.pt.", rnd(lowerAN, 43)), []string{"DOPPLER %s"}},
	{"pulumi", false, pre("pul-", rnd(hexd, 40)), []string{"PULUMI_ACCESS_TOKEN=%s"}},
	{"grafana-sa", false, pre("glsa_", rnd(alnum, 32), lit("_"), rnd(hexd, 8)), []string{"grafana %s"}},
	{"postman", false, pre("PMAK-", rnd(hexd, 24), lit("-"), rnd(hexd, 34)), []string{"postman %s"}},
	{"new-relic", false, pre("NRAK-", rnd(upperAN, 27)), []string{"newrelic %s"}},
	{"sentry-user", false, pre("sntryu_", rnd(hexd, 64)), []string{"sentry %s"}},
	{"planetscale", false, pre("pscale_tkn_", rnd(url64, 43)), []string{"planetscale %s"}},
	{"prefect", false, pre("pnu_", rnd(alnum, 36)), []string{"prefect %s"}},
	{"readme", false, pre("rdme_", rnd(lowerAN, 70)), []string{"readme %s"}},
	{"adobe-client-secret", false, pre("p8e-", rnd(alnum, 32)), []string{"adobe %s"}},
	{"1password-service", false, pre("ops_eyJ", rnd(b64, 250)), []string{"OP_SERVICE_ACCOUNT_TOKEN=%s"}},
	{"fly-io", false, pre("fo1_", rnd(url64, 43)), []string{"fly %s"}},
	{"pem-in-json", false, pre("-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0B", rnd(b64, 64), lit("\\n-----END PRIVATE KEY-----\\n")), []string{`{"type":"service_account","private_key":"%s","client_email":"x@y.iam.gserviceaccount.com"}`}},
}

// loadLines reads a testdata corpus: one line a case, # lines are comments.
func loadLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// survives reports whether a piece of secret is still in out: the whole
// secret, or (for secrets of 12 characters and more) any 8 of its
// characters in a row that the context around it did not already hold.
func survives(secret, context, out string) string {
	if strings.Contains(out, secret) {
		return secret
	}
	if len(secret) < 12 {
		return ""
	}
	for i := 0; i+8 <= len(secret); i++ {
		w := secret[i : i+8]
		if strings.Count(out, w) > strings.Count(context, w) {
			return w
		}
	}
	return ""
}

func TestRedactSecretCorpus(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 2026))
	total, caught, missed := 0, 0, 0
	kinds := map[string]bool{}
	for _, k := range secretKinds {
		kinds[k.kind] = true
		if k.missed {
			missed++
		}
		for _, c := range k.contexts {
			for range 2 {
				secret := k.secret(r)
				in := strings.Replace(c, "%s", secret, 1)
				out := Redact(in)
				total++
				if again := Redact(out); again != out {
					t.Errorf("%s: not idempotent:\n once  %q\n twice %q", k.kind, out, again)
				}
				if w := survives(secret, strings.Replace(c, "%s", "", 1), out); w != "" {
					t.Errorf("%s: %q survived:\n in  %q\n out %q", k.kind, w, in, out)
					continue
				}
				caught++
			}
		}
	}
	t.Logf("secret corpus: caught %d/%d secrets (%.1f%%) of %d kinds (%d of them the misses of issue 23)", caught, total, 100*float64(caught)/float64(total), len(kinds), missed)
	if total < 100 || len(kinds) < 50 || missed != 30 {
		t.Fatalf("corpus too small: %d secrets, %d kinds, %d misses", total, len(kinds), missed)
	}
}

func TestRedactOrdinaryCorpus(t *testing.T) {
	lines := loadLines(t, "testdata/redact_ordinary.txt")
	altered := 0
	for _, l := range lines {
		if out := Redact(l); out != l {
			altered++
			t.Logf("altered:\n in  %q\n out %q", l, out)
		}
	}
	rate := float64(altered) / float64(len(lines))
	t.Logf("ordinary corpus: false positives %d/%d lines (%.2f%%)", altered, len(lines), 100*rate)
	if len(lines) < 300 {
		t.Fatalf("ordinary corpus has %d lines, want >= 300", len(lines))
	}
	if rate > 0.01 {
		t.Errorf("%.2f%% of ordinary lines altered, want <= 1%%", 100*rate)
	}
	// Each line on its own and the whole file at once must agree: the
	// keyword windows are lines.
	whole := strings.Join(lines, "\n")
	var each []string
	for _, l := range lines {
		each = append(each, Redact(l))
	}
	if got := Redact(whole); got != strings.Join(each, "\n") {
		t.Errorf("redacting the whole ordinary corpus differs from redacting it line by line")
	}
}

// JSON stays valid after redaction, plain or escaped inside a JSON string,
// and the secret is gone.
func TestRedactKeepsJSONValid(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 23))
	docs := []string{
		`{"headers":{"Authorization":"Bearer %s"},"url":"https://api.acme.io"}`,
		`{"Authorization": "Basic %s"}`,
		`{"client_secret": "%s", "client_id": "abc"}`,
		`{"password":"%s","user":"bob"}`,
		`{"env":["DB_PASS=%s","MODE=prod"]}`,
		`{"cmd":"curl -u admin:%s https://x"}`,
		`{"note":"my password is %s"}`,
		`{"url":"redis://:%s@cache:6379/0"}`,
		`{"auths":{"r.io":{"auth":"%s"}}}`,
		`{"token":"ghp_%s"}`,
		`{"key":"-----BEGIN PRIVATE KEY-----\nMIIE%s"}`,
		`{"args":{"command":"sshpass -p %s ssh host"}}`,
		`{"api_key":"sk-proj-%s"}`,
		`{"headers":{"Proxy-Authorization":"Basic %s"}}`,
		`{"id_token":"eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.eyJ%s.c2lnbmF0dXJlX29mX3RoZV90b2tlbg"}`,
		`{"cookie":"session=eyJhbGciOiJIUzI1NiJ9.eyJ%s.c2lnbmF0dXJlX29mX3RoZV90b2tlbg"}`,
		`{"conn":"DefaultEndpointsProtocol=https;AccountName=a;AccountKey=%s==;EndpointSuffix=core.windows.net"}`,
		`{"url":"https://a.blob.core.windows.net/c?sv=2022&sig=%s"}`,
		`{"card":"4539 1488 0343 6467","y":"password=%s"}`,
	}
	for _, d := range docs {
		secret := rnd(alnum, 36)(r)
		plain := strings.ReplaceAll(d, "%s", secret)
		if !json.Valid([]byte(plain)) {
			t.Fatalf("bad test document %s", plain)
		}
		escaped, _ := json.Marshal(map[string]string{"arguments": plain})
		for _, in := range []string{plain, string(escaped)} {
			out := Redact(in)
			if !json.Valid([]byte(out)) {
				t.Errorf("invalid JSON after redaction:\n in  %s\n out %s", in, out)
			}
			if strings.Contains(out, secret) {
				t.Errorf("secret survived:\n in  %s\n out %s", in, out)
			}
		}
	}
}

// In a long line (a base64 image, minified JSON) a rule runs on its
// keyword's neighbourhood only; secrets there are still found.
func TestRedactLongLine(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	secrets := []string{"ghp_" + rnd(alnum, 36)(r), "sk_live_" + rnd(alnum, 24)(r), rnd(pwChars, 14)(r)}
	in := `{"image":"` + rnd(b64, 60000)(r) + `","token":"` + secrets[0] + `","note":"` + rnd(b64, 30000)(r) +
		` stripe ` + secrets[1] + ` DB_PASS=` + secrets[2] + ` ` + rnd(b64, 60000)(r) + `"}`
	out := Redact(in)
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("secret %q survived in a long line", s)
		}
	}
	if !json.Valid([]byte(out)) {
		t.Errorf("long line no longer valid JSON")
	}
	if len(in)-len(out) != 36+4+24+8+14-3*len(Redacted) {
		t.Errorf("long line: %d bytes removed, want only the three secrets", len(in)-len(out))
	}
}

func ExampleRedact_json() {
	fmt.Println(Redact(`{"headers":{"Authorization":"Bearer abcdef0123456789"}}`))
	// Output: {"headers":{"Authorization":"[redacted]"}}
}

// The repository's own Go sources and Markdown documents are ordinary text
// that the rules were not tuned on (a held-out corpus); the few fake secrets
// in them (README examples, the conformance suite's) count as altered lines.
func TestRedactRepositoryText(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Skip("not in the repository")
	}
	lines, altered, files := 0, 0, 0
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || strings.HasSuffix(p, "_test.go") || strings.Contains(d.Name(), "redact") ||
			!strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, ".md") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		for _, l := range strings.Split(string(b), "\n") {
			lines++
			if out := Redact(l); out != l {
				altered++
				t.Logf("%s:\n in  %q\n out %q", p, l, out)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rate := float64(altered) / float64(lines)
	t.Logf("repository text: %d/%d lines altered (%.3f%%) in %d files", altered, lines, 100*rate, files)
	if rate > 0.01 {
		t.Errorf("%.2f%% of the repository's lines altered, want <= 1%%", 100*rate)
	}
}
