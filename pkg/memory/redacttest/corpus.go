package redacttest

import (
	"math/rand/v2"
	"strings"
)

// A corpus of secrets: each kind has a generator of a fake secret in its real
// shape (random characters from a seeded source, never a real secret) and
// the contexts it is seen in. The 30 kinds issue 23 found missed are marked.
type Kind struct {
	Name     string
	Missed   bool // one of the 30 misses of issue 23
	Secret   func(r *rand.Rand) string
	Contexts []string // %s is the secret
}

// Character sets of the generators.
const (
	Alnum   = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	Hex     = "0123456789abcdef"
	LowerAN = "abcdefghijklmnopqrstuvwxyz0123456789"
	UpperAN = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	B64     = Alnum + "+/"
	URL64   = Alnum + "-_"
	Digits  = "0123456789"
	Bech32  = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
	PwChars = Alnum + "!#%^*_-"
)

// Rand makes n random characters of set.
func Rand(set string, n int) func(*rand.Rand) string {
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
			d = append(d, Digits[r.IntN(10)])
		}
		for c := byte('0'); c <= '9'; c++ {
			if luhn(append(d, c)) {
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

// Kinds are the corpus: more than 50 kinds, the 30 misses of issue 23 first.
var Kinds = []Kind{
	// the 30 misses of issue 23
	{"aws-configure-set", true, Rand(B64, 40), []string{"aws configure set aws_secret_access_key %s", "run: aws configure set aws_secret_access_key %s --profile prod"}},
	{"stripe-webhook", true, pre("whsec_", Rand(Alnum, 32)), []string{"STRIPE_WEBHOOK_SECRET=%s", "the signing secret is %s"}},
	{"google-oauth-secret", true, pre("GOCSPX-", Rand(URL64, 28)), []string{`{"web":{"client_id":"123-abc.apps.googleusercontent.com","client_secret":"%s"}}`, "use %s for the consent screen"}},
	{"redis-url-empty-user", true, Rand(Alnum, 24), []string{"ENGRAM_REDIS_URL=redis://:%s@cache.internal:6379/0", "connect with redis-cli -u redis://:%s@10.0.0.5:6379"}},
	{"db-pass", true, Rand(PwChars, 14), []string{"DB_PASS=%s", "export DB_PASS=%s"}},
	{"secret-key-base", true, Rand(Hex, 64), []string{"SECRET_KEY_BASE=%s", "export SECRET_KEY_BASE=%s"}},
	{"database-password-prod", true, Rand(PwChars, 16), []string{"DATABASE_PASSWORD_PROD=%s", "DATABASE_PASSWORD_PROD: %s"}},
	{"github-token-rw", true, Rand(Alnum, 36), []string{"GITHUB_TOKEN_RW=%s", "GITHUB_TOKEN_RW='%s'"}},
	{"azure-account-key", true, pre("", Rand(B64, 86), lit("==")), []string{"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=%s;EndpointSuffix=core.windows.net", "AccountKey=%s"}},
	{"azure-sas-sig", true, pre("", Rand(Alnum, 43), lit("%3D")), []string{"https://acme.blob.core.windows.net/c/f.txt?sv=2022-11-02&ss=b&srt=o&sp=r&se=2026-12-01T00:00:00Z&sig=%s", "SAS: ?sp=racwdl&st=2026-01-01&sig=%s"}},
	{"twilio-api-key", true, pre("SK", Rand(Hex, 32)), []string{"TWILIO_API_KEY_SID %s", "twilio key %s"}},
	{"mailgun-key", true, pre("key-", Rand(Hex, 32)), []string{"mailgun: %s", "curl --user 'api:%s' https://api.mailgun.net/v3/x"}},
	{"mailchimp-key", true, pre("", Rand(Hex, 32), lit("-us6")), []string{"MC key %s", "apikey %s for the newsletter"}},
	{"card-visa", true, card("4", 16), []string{"card: %s exp 12/29", "pay with %s please"}},
	{"card-mastercard", true, card("53", 16), []string{"mastercard %s", "my card number is %s"}},
	{"card-amex", true, card("37", 15), []string{"amex %s cvv 1234", "charge %s"}},
	{"docker-auth", true, Rand(B64, 40), []string{`{"auths":{"registry.acme.io":{"auth":"%s"}}}`, `"auth": "%s"`}},
	{"discord-bot", true, pre("", func(r *rand.Rand) string { return "MT" + Rand(Alnum, 24)(r) }, lit("."), Rand(URL64, 6), lit("."), Rand(URL64, 38)), []string{"bot.run('%s')", "DISCORD token %s"}},
	{"telegram-bot", true, pre("", Rand(Digits, 10), lit(":AA"), Rand(URL64, 33)), []string{"bot = Bot(token='%s')", "https://api.telegram.org/bot%s/getMe"}},
	{"shopify", true, pre("shpat_", Rand(Hex, 32)), []string{"X-Shopify-Access-Token: %s", "shop token %s"}},
	{"digitalocean", true, pre("dop_v1_", Rand(Hex, 64)), []string{"doctl auth init -t %s", "DO %s"}},
	{"vault", true, pre("hvs.", Rand(URL64, 24)), []string{"VAULT_TOKEN=%s", "vault login %s"}},
	{"age", true, pre("AGE-SECRET-KEY-1", Rand(Bech32, 58)), []string{"# created: 2026-01-01\n%s", "age key %s"}},
	{"sshpass", true, Rand(PwChars, 12), []string{"sshpass -p '%s' ssh root@10.0.0.7", "sshpass -p %s scp a b:"}},
	{"mysql-p", true, Rand(PwChars, 12), []string{"mysql -u root -p%s -h db app", "mysqldump -uadmin -p'%s' app > dump.sql"}},
	{"curl-u", true, Rand(PwChars, 14), []string{"curl -u admin:%s https://ci.acme.io/api", "curl --user deploy:%s -X POST https://x/y"}},
	{"prose-password", true, Rand(PwChars, 10), []string{"my password is %s", "btw the wifi password is %s, don't share it"}},
	{"databricks", true, pre("dapi", Rand(Hex, 32)), []string{"DATABRICKS_TOKEN %s", "token: %s"}},
	{"linear", true, pre("lin_api_", Rand(Alnum, 40)), []string{"LINEAR %s", "linear key %s"}},
	{"atlassian", true, pre("ATATT3xFfGF0", Rand(URL64, 60), lit("=1A2B3C4D")), []string{"jira api token %s", "curl -H 'X-Token %s'"}},
	// the kinds caught before, and more from gitleaks' rule set
	{"aws-access-key-id", false, pre("AKIA", Rand(UpperAN, 16)), []string{"aws_access_key_id = %s", "key %s"}},
	{"aws-secret-env", false, Rand(B64, 40), []string{"AWS_SECRET_ACCESS_KEY=%s"}},
	{"github-pat", false, pre("ghp_", Rand(Alnum, 36)), []string{"git clone https://%s@github.com/acme/x", "token %s"}},
	{"github-fine-grained", false, pre("github_pat_11", Rand(UpperAN, 20), lit("_"), Rand(Alnum, 59)), []string{"GH_TOKEN=%s"}},
	{"gitlab", false, pre("glpat-", Rand(URL64, 20)), []string{"glab auth login --token %s"}},
	{"slack-bot", false, pre("xoxb-", Rand(Digits, 12), lit("-"), Rand(Digits, 13), lit("-"), Rand(Alnum, 24)), []string{"SLACK_BOT_TOKEN=%s"}},
	{"slack-webhook", false, pre("https://hooks.slack.com/services/T", Rand(UpperAN, 8), lit("/B"), Rand(UpperAN, 8), lit("/"), Rand(Alnum, 24)), []string{"webhook: %s"}},
	{"stripe-live", false, pre("sk_live_", Rand(Alnum, 24)), []string{"Stripe.api_key = '%s'", "stripe %s"}},
	{"openai", false, pre("sk-proj-", Rand(URL64, 48)), []string{"OPENAI_API_KEY=%s", "client = OpenAI(api_key=\"%s\")"}},
	{"anthropic", false, pre("sk-ant-api03-", Rand(URL64, 93), lit("AA")), []string{"x-api-key: %s"}},
	{"google-api", false, pre("AIza", Rand(URL64, 35)), []string{"https://maps.googleapis.com/maps/api/js?key=%s"}},
	{"google-oauth-access", false, pre("ya29.a0", Rand(URL64, 60)), []string{"access token %s"}},
	{"npm", false, pre("npm_", Rand(Alnum, 36)), []string{"//registry.npmjs.org/:_authToken=%s"}},
	{"huggingface", false, pre("hf_", Rand(Alnum, 34)), []string{"huggingface-cli login --token %s"}},
	{"sendgrid", false, pre("SG.", Rand(URL64, 22), lit("."), Rand(URL64, 43)), []string{"SENDGRID_API_KEY=%s"}},
	{"pypi", false, pre("pypi-AgEIcHlwaS5vcmc", Rand(URL64, 60)), []string{"password = %s"}},
	{"jwt", false, pre("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ", Rand(URL64, 40), lit("."), Rand(URL64, 43)), []string{"cookie: session=%s"}},
	{"private-key", false, pre("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA", Rand(B64, 60), lit("\n"), Rand(B64, 64), lit("\n-----END RSA PRIVATE KEY-----")), []string{"key file:\n%s\nend"}},
	{"openssh-key", false, pre("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA", Rand(B64, 64), lit("\n-----END OPENSSH PRIVATE KEY-----")), []string{"%s"}},
	{"authorization-basic", false, Rand(B64, 28), []string{"Authorization: Basic %s"}},
	{"bearer", false, Rand(URL64, 40), []string{"curl -H \"Authorization: Bearer %s\" https://api.acme.io", "use Bearer %s"}},
	{"postgres-url", false, Rand(Alnum, 16), []string{"DATABASE_URL=postgres://app:%s@db.internal:5432/app"}},
	{"nats-url", false, Rand(Alnum, 20), []string{"nats://admin:%s@nats.internal:4222"}},
	{"password-assign", false, Rand(PwChars, 12), []string{"password=%s", `{"password": "%s"}`}},
	{"client-secret-yaml", false, Rand(URL64, 32), []string{"  client_secret: %s"}},
	{"cli-password-flag", false, Rand(PwChars, 12), []string{"docker login -u bob --password %s registry.acme.io", "psql --password=%s"}},
	{"docker-login-p", false, Rand(PwChars, 12), []string{"docker login -u bob -p %s registry.acme.io"}},
	{"doppler", false, pre("dp.pt.", Rand(LowerAN, 43)), []string{"DOPPLER %s"}},
	{"pulumi", false, pre("pul-", Rand(Hex, 40)), []string{"PULUMI_ACCESS_TOKEN=%s"}},
	{"grafana-sa", false, pre("glsa_", Rand(Alnum, 32), lit("_"), Rand(Hex, 8)), []string{"grafana %s"}},
	{"postman", false, pre("PMAK-", Rand(Hex, 24), lit("-"), Rand(Hex, 34)), []string{"postman %s"}},
	{"new-relic", false, pre("NRAK-", Rand(UpperAN, 27)), []string{"newrelic %s"}},
	{"sentry-user", false, pre("sntryu_", Rand(Hex, 64)), []string{"sentry %s"}},
	{"planetscale", false, pre("pscale_tkn_", Rand(URL64, 43)), []string{"planetscale %s"}},
	{"prefect", false, pre("pnu_", Rand(Alnum, 36)), []string{"prefect %s"}},
	{"readme", false, pre("rdme_", Rand(LowerAN, 70)), []string{"readme %s"}},
	{"adobe-client-secret", false, pre("p8e-", Rand(Alnum, 32)), []string{"adobe %s"}},
	{"1password-service", false, pre("ops_eyJ", Rand(B64, 250)), []string{"OP_SERVICE_ACCOUNT_TOKEN=%s"}},
	{"fly-io", false, pre("fo1_", Rand(URL64, 43)), []string{"fly %s"}},
	{"pem-in-json", false, pre("-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0B", Rand(B64, 64), lit("\\n-----END PRIVATE KEY-----\\n")), []string{`{"type":"service_account","private_key":"%s","client_email":"x@y.iam.gserviceaccount.com"}`}},
}

// luhn reports whether the digits pass the Luhn check.
func luhn(d []byte) bool {
	sum := 0
	for i := range d {
		n := int(d[len(d)-1-i] - '0')
		if i%2 == 1 {
			n *= 2
			if n > 9 {
				n -= 9
			}
		}
		sum += n
	}
	return sum%10 == 0
}

// Case is one secret of a kind in one of its contexts.
type Case struct {
	Kind   string
	Missed bool   // one of issue 23's 30 misses
	Secret string // the fake secret
	Text   string // the context with the secret in it
}

// Context is the text without its secret (what the context alone holds).
func (c Case) Context() string { return strings.Replace(c.Text, c.Secret, "", 1) }

// Cases is the corpus from a seeded source: every kind in each of its
// contexts, n times.
func Cases(seed1, seed2 uint64, n int) []Case {
	r := rand.New(rand.NewPCG(seed1, seed2))
	var out []Case
	for _, k := range Kinds {
		for _, c := range k.Contexts {
			for range n {
				s := k.Secret(r)
				out = append(out, Case{Kind: k.Name, Missed: k.Missed, Secret: s, Text: strings.Replace(c, "%s", s, 1)})
			}
		}
	}
	return out
}

// Survives reports whether a piece of secret is still in out: the whole
// secret, or (for secrets of 12 characters and more) any 8 of its
// characters in a row that the context around it did not already hold.
// "" means the secret is gone.
func Survives(secret, context, out string) string {
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
