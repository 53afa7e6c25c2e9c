package memory

import (
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Redacted replaces every secret Redact finds.
const Redacted = "[redacted]"

// ruleSpec is one redaction rule as written in a table (ours in this file,
// gitleaks' ported ones in redact_gitleaks.go).
type ruleSpec struct {
	id string
	// keywords: the rule can only match text whose ASCII-lower-cased form
	// contains one of them (a cheap test before the regular expression); the
	// expression runs only on the lines that contain one. No keyword: the
	// rule's line test decides, or it always runs.
	keywords []string
	re       string
	// group is the capture group holding the secret (the first non-empty
	// one numbered group or above, for alternatives); 0 means gitleaks'
	// convention: the first non-empty group, or the whole match if the
	// expression has no group. Only the secret is replaced, so what
	// identifies its role (a variable name, a URL's host, JSON quotes) stays.
	group int
	// entropy: a secret whose Shannon entropy is not above it is not one.
	entropy float64
	// check, when set, must accept the secret (Luhn for card numbers,
	// placeholders and code expressions for assignments); quoted says whether
	// a quote precedes it.
	check func(secret string, quoted bool, match string) bool
	// line, when set, replaces keywords: the rule runs on each line of the
	// text that passes this cheap test.
	line func(line string) bool
	// digit: every match holds a digit, so a keyword's line without one is
	// not searched ("code" is in most coding memories; a backup code's
	// list has digits).
	digit bool
	// multiline: run on the whole text, not on the lines with a keyword.
	multiline bool
	// nested: a value that is itself a name and its separator (credential:
	// API_KEY="v") is searched again from its start, so the inner value is
	// found although the outer match covered it.
	nested bool
}

type rule struct {
	ruleSpec
	re  *regexp.Regexp
	kws []int // indexes into the keyword table
}

// Our rules, applied before gitleaks' ones. They cover what gitleaks' rule set
// leaves out or only catches next to a vendor's name: passwords in prose and
// command lines, URLs with passwords, credential assignments whose name holds
// the keyword anywhere (DB_PASS, SECRET_KEY_BASE, GITHUB_TOKEN_RW), card
// numbers (Luhn-checked), and vendor formats seen without their vendor's name.
var ownRules = []ruleSpec{
	// PEM private key blocks (RSA, EC, OPENSSH, ENCRYPTED, PGP ...); an
	// unterminated block is redacted to the end of the text or, inside a
	// JSON string, to its closing quote.
	{id: "private-key", keywords: []string{"-----begin"}, multiline: true,
		re: `-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:[^"]*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?:[^"\\]|\\[^"])*)`},
	// Credentials inside URLs: scheme://user:password@host and
	// scheme://:password@host (redis://:pw@host).
	{id: "url-userinfo", keywords: []string{"://"}, group: 2,
		re: `(?i)\b([a-z][a-z0-9+.\-]*://)([^\s/?#@:"'\\\[\]]*:[^\s/?#"'\\]+)@`},
	// Authorization / Proxy-Authorization headers: the rest of the line, or
	// of the JSON string the header is in.
	{id: "authorization", keywords: []string{"authorization"}, group: 3,
		re: `(?i)\b((?:proxy-)?authorization)(\\?["']?[ \t]*[:=][ \t]*\\?["']?)([^\r\n"\\]*[^\s"\\])`},
	// Bearer tokens anywhere (a digit in it, or long: "bearer authentication" is prose).
	{id: "bearer", keywords: []string{"bearer"}, group: 2, check: bearerLike,
		re: `(?i)\b(bearer)[ \t]+([A-Za-z0-9\-._~+/]{8,}=*)`},
	// Credential assignments: name = value, name: "value", "name": "value"
	// (also escaped inside a JSON string), name := value, NAME=value in
	// env files. The keyword may be anywhere in the name. The name stays.
	// A bare "pass" or "pw" as the name (pass=..., pw: ...) needs a value
	// that looks like a password: "pass: the cursor" is prose.
	{id: "assignment", keywords: []string{"pass", "pwd", "secret", "key", "token", "credential", "creds", "pw=", "pw:", "pw ", "pw\t", "pw\"", "pw'", "pw\\"}, group: 3, check: assignedSecret, nested: true,
		re: `(?i)(?:^|[^A-Za-z0-9_.\-])((?:[A-Za-z0-9_.\-]*(?:password|passwd|passphrase|passcode|pwd|secret|api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key|account[_\-]?key|signing[_\-]?key|encryption[_\-]?key|master[_\-]?key|license[_\-]?key|token|credentials?|creds)|(?:[A-Za-z0-9]+[_\-])+pass|pass|pw)(?:[_.\-][A-Za-z0-9]+)*)` +
			`(\\?["']?[ \t]*(?::=|=>|[:=])[ \t]*)` +
			`(?:\\"([^"\\\r\n]*)\\"|"((?:[^"\\\r\n]|\\.)*)"|'([^'\r\n]*)'|([^\s"'\x60,;&\\=][^\s"'\x60,;&\\]*))`},
	// The name, a space, the value: "PASSWORD Hunter2Hunter2Y", "twilio
	// auth token 5f4dcc...", "wallet private key 4c08...": a value that
	// looks like a generated one (letters and digits, long).
	{id: "password-space-value", keywords: []string{"password ", "password\t", "passwd ", "passwd\t", "passphrase ", "passphrase\t", "passcode ", "passcode\t", "pwd ", "pwd\t"}, group: 1, check: spacedPassword,
		re: `(?i)\b(?:password|passwd|passphrase|passcode|pwd)[ \t]+([^\s"'\x60\\]+)`},
	{id: "named-secret-value", keywords: []string{"key ", "key\t", "token ", "token\t", "secret ", "secret\t"}, group: 1, check: spacedKey,
		re: `(?i)\b(?:secret access key|secret key|access key|api key|api token|auth token|access token|bearer token|bot token|private key|client secret|signing secret|webhook secret|refresh token|session token|token|secret)[ \t]+([^\s"'\x60\\]+)`},
	// Passphrases of words: "the wifi password is correct horse battery
	// staple", "my seed phrase is abandon ability ... accident" (4 to 8
	// words that read as no sentence, or 12 to 24 for a wallet's seed).
	{id: "passphrase-words", keywords: []string{"password", "passphrase", "passcode", "pass phrase", "phrase", "mnemonic", "seed words", "recovery words"}, group: 1, check: wordsPassphrase,
		re: `(?i)\b(?:password|passphrase|passcode|pass phrase|seed phrase|recovery phrase|mnemonic(?: phrase)?|secret phrase|backup phrase|seed words|recovery words)(?:\s+(?:for|of|to)\s+[^\s:]+)?\s*(?:is|was|is now|are|were|:)[ \t]+((?:[a-z]+[ \t]+)+[a-z]+)[ \t]*(?:[.!?;,)]|$)`},
	// .pgpass: host:port:database:user:password, one a line.
	{id: "pgpass", line: pgpassShape, group: 1, check: pgpassSecret,
		re: `^[ \t]*(?:\*|[A-Za-z0-9_.\-]*[A-Za-z][A-Za-z0-9_.\-]*|[0-9]{1,3}(?:\.[0-9]{1,3}){3}|\[[0-9A-Fa-f:]+\]):(?:\*|[0-9]{1,5}):[^\s:]+:[^\s:]+:(\S+?)[ \t]*$`},
	// 2FA backup and recovery codes: "my 2FA backup codes are 8391-2274
	// 5521-9087", "recovery code: 7hk2-99xq" (every code holds a digit).
	{id: "backup-codes", keywords: []string{"code"}, group: 1, check: codeList, digit: true,
		re: `(?i)\b(?:2fa|mfa|two-factor|2-factor|backup|recovery|otp|one-time|verification|authenticator|totp|security|scratch)\s+(?:(?:backup|recovery|login|auth|authentication|verification|security)\s+)?codes?\s*(?:are|is|were|was|:|=)?\s*` +
			`([A-Za-z0-9]*[0-9][A-Za-z0-9]*(?:-[A-Za-z0-9]+)?(?:[ \t]*[,;]?[ \t]+(?:and[ \t]+)?[A-Za-z0-9]*[0-9][A-Za-z0-9]*(?:-[A-Za-z0-9]+)?)*)`},
	// CLI forms with a space instead of '=': aws configure set
	// aws_secret_access_key <secret>, --password <pw>, --token <t>.
	{id: "aws-configure-set", keywords: []string{"aws", "configure"}, group: 1,
		re: `(?i)\baws\s+configure\s+set\s+\S*(?:secret|key|token)\S*\s+["']?([^\s"'\x60]+)`},
	{id: "cli-secret-flag", keywords: []string{"--pass", "--token", "--secret", "--api-key", "--apikey", "--client-secret", "--auth-token", "--access-token", "--key"}, group: 1, check: notPlaceholder,
		re: `(?i)(?:^|\s)--(?:password|passwd|pass|token|secret|api-key|apikey|client-secret|auth-token|access-token|key)(?:\s+|=)["']?([^\s"'\x60=-][^\s"'\x60]*)`},
	// sshpass -p pw, mysql -pSECRET (no space; -P is a port), mysql -p 'pw'.
	{id: "sshpass", keywords: []string{"sshpass"}, group: 1,
		re: `\bsshpass\b.*?\s-p\s*["']?([^\s"'\x60]+)`},
	{id: "mysql-p", keywords: []string{"mysql", "mariadb"}, group: 1,
		re: `\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n|;&]*?\s-p["']?([^\s"'\x60]+)`},
	{id: "docker-login-p", keywords: []string{"login"}, group: 1,
		re: `\blogin\b[^\n|;&]*?\s-p\s+["']?([^\s"'\x60]+)`},
	// curl -u user:pass, --user user:pass, wget --password / --http-password.
	{id: "curl-user", keywords: []string{"curl"}, group: 1,
		re: `\bcurl\b[^\n|;&]*?\s(?:-u|--user)(?:\s+|=)["']?[^\s:"'\x60]*:([^\s"'\x60]+)`},
	// Passwords in prose: "my password is hunter2", "the wifi passphrase was
	// 'x y'", "password for root: x".
	{id: "prose-password", keywords: []string{"pass", "pwd", "pin", "pw "}, group: 1, check: proseSecret,
		re: `(?i)\b(?:password|passwd|passphrase|passcode|passwort|mot de passe|pwd|pw|pin(?: code)?)(?:\s+(?:for|of|to)\s+[^\s:]+\s*:|\s+(?:is|was|is now|will be|would be|became))\s+(?:"([^"\r\n]+)"|'([^'\r\n]+)'|\x60([^\x60\r\n]+)\x60|([^\s"'\x60\\]+))`},
	// .netrc: machine host login user password secret (on one line or
	// several), default login user password secret.
	{id: "netrc", keywords: []string{"machine", "default"}, group: 1, check: proseSecret, multiline: true,
		// (also inside a JSON string, where the line breaks are \n)
		re: `(?i)\b(?:machine(?:\s|\\[nrt])+[^\s\\"]+|default)(?:(?:\s|\\[nrt])+(?:login|account|port|protocol)(?:\s|\\[nrt])+[^\s\\"]+)*(?:\s|\\[nrt])+password(?:\s|\\[nrt])+([^\s"'\\]+)`},
	// kubeconfig: a client key, tokens of users and auth providers.
	{id: "kubeconfig", keywords: []string{"key-data", "token"}, group: 1,
		re: `(?i)(?:^|[\s"'{,])(?:client-key-data|id-token|refresh-token|access-token|auth-token|token)["']?\s*:\s*["']?([A-Za-z0-9+/=._~\-]{16,})`},
	// Passwords in prose in other languages: the word for a password, what
	// it is for ("für den Router", "del wifi"), a copula or a colon, and a
	// value that looks like one (secretish).
	{id: "prose-password-de", keywords: []string{"passwort", "kennwort", "geheimzahl", "zugangscode", "pin"}, group: 1, check: secretish,
		re: `(?i)\b(?:passwort|kennwort|geheimzahl|zugangscode|pin)(?:\s+(?:für|fuer|von|vom|zum|zur|des|der|dem|den|meines|meiner)(?:\s+\S+){1,3}?)?\s*(?:ist|lautet|war|lautete|heißt|heisst|:|–|—)\s*` + proseValue},
	{id: "prose-password-fr", keywords: []string{"mot de passe", "mdp", "code pin", "code secret", "code d'acc"}, group: 1, check: secretish,
		re: `(?i)\b(?:mot de passe|mdp|code pin|code secret|code d'accès|code d'acces)(?:\s+(?:de|du|des|pour|d')(?:\s*\S+){1,3}?)?\s*(?:est|était|etait|sera|c'est|:)\s*` + proseValue},
	{id: "prose-password-es", keywords: []string{"contrase", "clave", "pin"}, group: 1, check: secretish,
		re: `(?i)\b(?:contraseña|contrasena|clave secreta|clave|pin)(?:\s+(?:de|del|para)(?:\s+\S+){1,3}?)?\s*(?:es|era|será|sera|:)\s*` + proseValue},
	{id: "prose-password-pt", keywords: []string{"senha", "palavra-passe", "palavra passe", "pin"}, group: 1, check: secretish,
		re: `(?i)\b(?:senha|palavra-passe|palavra passe|pin)(?:\s+(?:de|do|da|para)(?:\s+\S+){1,3}?)?\s*(?:é|e|era|será|sera|:)\s*` + proseValue},
	{id: "prose-password-it", keywords: []string{"password", "parola d", "parola chiave", "chiave", "pin"}, group: 1, check: secretish,
		// "password:" is an assignment (its own rule, which knows code)
		re: `(?i)\b(?:(?:parola d'ordine|parola chiave|chiave)(?:\s+(?:di|del|della|dello|per)(?:\s+\S+){1,3}?)?\s*(?:è|e'|era|sarà|sara|:)|(?:password|pin)(?:\s+(?:di|del|della|dello|per)(?:\s+\S+){1,3}?)?\s*(?:è|e'|era|sarà|sara))\s*` + proseValue},
	{id: "prose-password-nl", keywords: []string{"wachtwoord", "pincode"}, group: 1, check: secretish,
		re: `(?i)\b(?:wachtwoord|pincode)(?:\s+(?:van|voor)(?:\s+\S+){1,3}?)?\s*(?:is|was|luidt|:)\s*` + proseValue},
	{id: "prose-password-id", keywords: []string{"sandi", "password", "kata kunci", "pin"}, group: 1, check: secretish,
		re: `(?i)\b(?:(?:kata sandi|katasandi|sandi|kata kunci)(?:\s+(?:saya|ku|kamu|anda|untuk|dari|akun)(?:\s+\S+){0,2}?)?\s*(?:adalah|ialah|yaitu|yakni|:)|(?:password|pin)(?:\s+(?:saya|ku|kamu|anda|untuk|dari|akun)(?:\s+\S+){0,2}?\s*(?:adalah|ialah|yaitu|yakni|:)|\s+(?:adalah|ialah|yaitu|yakni)))\s*` + proseValue},
	{id: "prose-password-ru", keywords: []string{"пароль", "Пароль", "ПАРОЛЬ", "пин", "ПИН", "код доступа"}, group: 1, check: secretish,
		re: `(?i)(?:пароль|пин-код|пин|код доступа)(?:\s+(?:от|для|к)(?:\s+\S+){1,3}?)?\s*(?:—|–|-|:|это|будет|был)?\s*` + proseValue},
	{id: "prose-password-cjk", keywords: []string{"密码", "密碼", "口令", "パスワード", "暗証番号", "パスコード", "비밀번호"}, group: 1, check: secretish,
		re: `(?:密码|密碼|口令|パスワード|暗証番号|パスコード|비밀번호)[^\s：:是为為はは는은]{0,8}?\s*(?:是|为|為|は|는|은|：|:)?\s*([\x21-\x7e]{4,})`},
	// tr, pl, sv, vi, ar, hi, el: the word for a password, what it is for,
	// a copula or a colon where the language puts one before the value (tr
	// and hi put it after: "şifrem X'dir", "पासवर्ड X है").
	{id: "prose-password-more", keywords: []string{"şifre", "Şifre", "ŞİFRE", "parola", "hasł", "Hasł", "HASŁ", "hasło", "lösenord", "Lösenord", "LÖSENORD",
		"mật khẩu", "Mật khẩu", "MẬT KHẨU", "كلمة المرور", "كلمة السر", "الرقم السري", "पासवर्ड", "κωδικ", "Κωδικ", "συνθηματικ"}, group: 1, check: secretish,
		re: `(?i)(?:şifre(?:m|miz|si|niz)?|parola(?:m|mız|sı|nız)?|hasło|hasła|lösenord(?:et)?|mật khẩu|كلمة المرور|كلمة السر|الرقم السري|पासवर्ड|κωδικός|κωδικό|συνθηματικό)` +
			`(?:(?:\s+(?:do|dla|od|till|för|på|của|cho|wifi|wi-fi|للواي|للراوتر|का|की|के|του|της|για|μου|σου)(?:\s+[^\s:=]+){0,2}?)?\s*(?:to|jest|brzmi|är|var|là|هي|هو|είναι|:|=|-|–)|\s)\s*` + proseValue},
	// Secrets in English prose: "my aws secret access key is ...", "the
	// API key is ...": a value that looks like one (secretish).
	{id: "prose-secret-en", keywords: []string{"key", "token", "secret"}, group: 1, check: secretLike,
		re: `(?i)\b(?:secret access key|secret key|access key|api key|api token|auth token|access token|bearer token|bot token|private key|client secret|signing secret|webhook secret|token|secret)\s+(?:is|was|is now|will be)\s*` + proseValue},
	// Docker config.json: "auth": "base64(user:pass)" (also escaped).
	{id: "docker-auth", keywords: []string{"auth"}, group: 1,
		re: `(?i)\\?"auth\\?"\s*:\s*\\?"([A-Za-z0-9+/=]{8,})\\?"`},
	// Azure storage connection strings and SAS signatures.
	{id: "azure-account-key", keywords: []string{"accountkey", "sharedaccesskey"}, group: 1,
		re: `(?i)\b(?:AccountKey|SharedAccessKey)=([A-Za-z0-9+/=]{20,})`},
	{id: "azure-sas-sig", keywords: []string{"sig="}, group: 1,
		re: `(?:[?&;\s"']|\\u0026)sig=([A-Za-z0-9%+/=]{16,})`},
	// Vendor formats gitleaks only catches next to the vendor's name, or with
	// a length that real tokens do not always have.
	{id: "stripe-webhook-secret", keywords: []string{"whsec_"}, re: `\bwhsec_[A-Za-z0-9]{24,}`},
	{id: "stripe-key", keywords: []string{"_live_", "_test_"}, re: `\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}`},
	{id: "google-oauth-client-secret", keywords: []string{"gocspx-"}, re: `\bGOCSPX-[A-Za-z0-9_\-]{20,}`},
	{id: "google-oauth-token", keywords: []string{"ya29."}, re: `\bya29\.[0-9A-Za-z_\-]{20,}`},
	{id: "twilio-api-key", line: twilioShape, re: `\b(?:SK|AC)[0-9a-f]{32}\b`},
	{id: "mailgun-key", keywords: []string{"key-"}, re: `\bkey-[0-9a-zA-Z]{32}\b`},
	{id: "mailchimp-key", keywords: []string{"-us"}, re: `\b[0-9a-f]{32}-us[0-9]{1,2}\b`},
	{id: "discord-bot-token", line: discordShape, re: `\b[MNO][A-Za-z0-9_\-]{23,31}\.[A-Za-z0-9_\-]{6,7}\.[A-Za-z0-9_\-]{27,40}`},
	{id: "telegram-bot-token", keywords: []string{":aa"}, group: 1, re: `(?:\b|bot)([0-9]{8,10}:AA[A-Za-z0-9_\-]{33})\b`},
	{id: "new-relic-user-key", keywords: []string{"nrak-"}, re: `\bNRAK-[A-Z0-9]{27}\b`},
	{id: "shopify-token", keywords: []string{"shpat_", "shpss_", "shpca_", "shppa_"}, re: `\bshp(?:at|ss|ca|pa)_[A-Za-z0-9]{32}\b`},
	{id: "digitalocean-token", keywords: []string{"dop_v1_", "doo_v1_", "dor_v1_"}, re: `\bdo[opr]_v1_[A-Za-z0-9]{40,64}\b`},
	{id: "vault-token", keywords: []string{"hvs.", "hvb.", "hvr."}, re: `\bhv[sbr]\.[A-Za-z0-9_\-]{20,}`},
	{id: "age-secret-key", keywords: []string{"age-secret-key-"}, re: `AGE-SECRET-KEY-1[0-9A-Z]{50,}`},
	{id: "databricks-token", keywords: []string{"dapi"}, re: `\bdapi[0-9a-f]{32}(?:-[0-9])?\b`},
	{id: "linear-api-key", keywords: []string{"lin_api_"}, re: `\blin_api_[A-Za-z0-9]{32,}`},
	{id: "atlassian-api-token", keywords: []string{"atatt", "atctt"}, re: `\bAT[AC]TT[A-Za-z0-9_\-=]{20,}`},
	{id: "aws-access-key-id", keywords: []string{"akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa", "abia", "acca"}, re: `\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA|ABIA|ACCA)[A-Z0-9]{16}\b`},
	{id: "github-token", keywords: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, re: `\bgh[pousr]_[A-Za-z0-9]{30,}`},
	{id: "github-fine-grained", keywords: []string{"github_pat_"}, re: `\bgithub_pat_[A-Za-z0-9_]{22,}`},
	{id: "gitlab-token", keywords: []string{"glpat-", "gldt-", "glrt-", "glptt-"}, re: `\bgl(?:pat|dt|rt|ptt)-[A-Za-z0-9_\-]{20,}`},
	{id: "slack-token", keywords: []string{"xox"}, re: `\bxox[abposre]-[A-Za-z0-9\-]{10,}`},
	{id: "slack-webhook", keywords: []string{"hooks.slack.com"}, re: `https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+`},
	{id: "openai-anthropic-key", keywords: []string{"sk-"}, re: `\bsk-[A-Za-z0-9_\-]{20,}`},
	{id: "google-api-key", keywords: []string{"aiza"}, re: `\bAIza[0-9A-Za-z_\-]{35}`},
	{id: "npm-token", keywords: []string{"npm_"}, re: `\bnpm_[A-Za-z0-9]{36}\b`},
	{id: "huggingface-token", keywords: []string{"hf_"}, re: `\bhf_[A-Za-z0-9]{30,}`},
	{id: "sendgrid-key", keywords: []string{"sg."}, re: `\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}`},
	{id: "pypi-token", keywords: []string{"pypi-"}, re: `\bpypi-[A-Za-z0-9_\-]{50,}`},
	{id: "jwt", keywords: []string{"eyj"}, re: `\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}`},
	// Payment card numbers (Visa, Mastercard, Amex, Discover), 13 to 19
	// digits in a row or grouped 4-4-4-4 or 4-6-5 by spaces or dashes,
	// Luhn-checked.
	{id: "card-number", line: hasDigitRun, check: luhnCard,
		re: `\b(?:4[0-9]{3}|5[1-5][0-9]{2}|2[2-7][0-9]{2}|3[47][0-9]{2}|6(?:011|5[0-9]{2}))(?:[0-9]{9,15}|(?:[ \-][0-9]{4}){3}|[ \-][0-9]{6}[ \-][0-9]{5})\b`},
}

var (
	rulesOnce sync.Once
	rules     []rule
	kwTable   []string        // every distinct keyword
	kwByPair  [][]int         // slot -> indexes of the keywords starting with a pair of bytes
	kwPairs   [1 << 16]uint16 // first two bytes -> slot in kwByPair (0: none)
	kwRules   [][]int         // keyword index -> the rules (indexes in rules) naming it
	unkeyed   []int           // the rules without keywords (a line test or none), in order
)

func compileRules() {
	kwIndex := map[string]int{}
	kwByPair = [][]int{nil}
	add := func(k string) int {
		if i, ok := kwIndex[k]; ok {
			return i
		}
		i := len(kwTable)
		kwIndex[k] = i
		kwTable = append(kwTable, k)
		if len(k) >= 2 {
			p := uint16(k[0])<<8 | uint16(k[1])
			if kwPairs[p] == 0 {
				kwPairs[p] = uint16(len(kwByPair))
				kwByPair = append(kwByPair, nil)
			}
			kwByPair[kwPairs[p]] = append(kwByPair[kwPairs[p]], i)
		}
		return i
	}
	for _, s := range slices.Concat(ownRules, gitleaksRules) {
		r := rule{ruleSpec: s, re: regexp.MustCompile(s.re)}
		for _, k := range s.keywords {
			if len(k) < 2 {
				panic("memory: redaction rule " + s.id + ": keyword " + k + " is shorter than 2 bytes")
			}
			k := add(k)
			r.kws = append(r.kws, k)
			for len(kwRules) <= k {
				kwRules = append(kwRules, nil)
			}
			kwRules[k] = append(kwRules[k], len(rules))
		}
		if strings.HasPrefix(s.id, "gitleaks:") {
			// gitleaks' few expressions that reach across lines run on the whole text
			r.multiline = strings.Contains(s.re, `[\r\n]{`) || strings.Contains(s.re, "(?s")
		}
		if len(r.kws) == 0 || r.line != nil {
			unkeyed = append(unkeyed, len(rules))
		}
		rules = append(rules, r)
	}
}

// Redact replaces the secrets found in s with "[redacted]": private key
// blocks, Authorization headers, bearer tokens, credential assignments
// (password=..., "api_key": "...", DB_PASS=..., pass=...: the name stays, the
// value goes), a password's or a key's name followed by a generated value
// ("auth token 5f4d..."), passwords in prose and on command lines (sshpass
// -p, mysql -p, curl -u), passphrases of words and wallet seed phrases,
// .netrc and .pgpass lines, 2FA backup codes, credentials inside URLs, card
// numbers, and the vendor key formats
// of gitleaks' default rule set (ported in redact_gitleaks.go) plus our own.
// Inside JSON only string contents are replaced, so JSON stays valid. It is
// idempotent: Redact(Redact(s)) == Redact(s). Every backend applies it to
// label and body on every write.
func Redact(s string) string {
	rulesOnce.Do(compileRules)
	for range 4 { // until nothing changes; one pass almost always suffices
		out := redactOnce(s)
		if out == s {
			return out
		}
		s = out
	}
	return s
}

type span struct{ start, end int }

func redactOnce(s string) string {
	lower := asciiLower(s)
	ks := scanPool.Get().(*kwScan)
	defer scanPool.Put(ks)
	ks.scan(lower)
	hits := ks.hits // keyword index -> positions
	var spans []span
	lineSeen := map[int]bool{}
	for _, i := range ks.todo {
		r := &rules[i]
		if r.line != nil {
			for start := 0; start < len(s); {
				end := strings.IndexByte(s[start:], '\n')
				if end < 0 {
					end = len(s)
				} else {
					end += start
				}
				if r.line(s[start:end]) {
					spans = r.find(s[start:end], start, spans)
				}
				start = end + 1
			}
			continue
		}
		if r.multiline || len(r.kws) == 0 {
			spans = r.find(s, 0, spans)
			continue
		}
		// run on each line that holds a keyword (short inputs keep Go's
		// regexp on its fast paths)
		clear(lineSeen)
		for _, k := range r.kws {
			for _, p := range hits[k] {
				start, end := window(s, p)
				if lineSeen[start] {
					continue
				}
				lineSeen[start] = true
				if r.digit && !strings.ContainsAny(s[start:end], "0123456789") {
					continue
				}
				spans = r.find(s[start:end], start, spans)
			}
		}
	}
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for i := 0; i < len(spans); {
		start, end := spans[i].start, spans[i].end
		for i++; i < len(spans) && spans[i].start <= end; i++ {
			end = max(end, spans[i].end)
		}
		if start < last {
			start = last
		}
		b.WriteString(s[last:start])
		b.WriteString(Redacted)
		last = end
	}
	b.WriteString(s[last:])
	return b.String()
}

// Lines longer than longLine (a base64 image, minified JSON) are not
// searched whole for a keyword's rule: the window is the keyword's
// neighbourhood, wide enough for every secret the rules know.
const (
	longLine     = 4096
	windowBefore = 256
	windowAfter  = 1024
)

// window returns the part of s a rule whose keyword is at p runs on: the
// line holding p, or, in a long line, p's neighbourhood.
func window(s string, p int) (start, end int) {
	lo := max(0, p-longLine)
	if i := strings.LastIndexByte(s[lo:p], '\n'); i >= 0 {
		start = lo + i + 1
	} else if lo > 0 {
		start = p - windowBefore
	}
	hi := min(len(s), p+longLine)
	if i := strings.IndexByte(s[p:hi], '\n'); i >= 0 {
		end = p + i
	} else if hi < len(s) {
		end = p + windowAfter
	} else {
		end = len(s)
	}
	return start, end
}

// find appends the spans (offset by off) of the secrets r finds in text.
func (r *rule) find(text string, off int, spans []span) []span {
	for _, m := range r.re.FindAllStringSubmatchIndex(text, -1) {
		start, end := m[0], m[1]
		switch {
		case len(m) > 2:
			start = -1
			for g := max(r.group, 1); 2*g < len(m); g++ {
				if m[2*g] >= 0 && m[2*g+1] > m[2*g] {
					start, end = m[2*g], m[2*g+1]
					break
				}
			}
		}
		if start < 0 || end <= start {
			continue
		}
		if !r.multiline {
			// a secret never holds a quote or ends in a backslash: whatever
			// a rule's character class allows, JSON structure (the closing
			// quote, the backslash escaping it) stays
			if i := strings.IndexByte(text[start:end], '"'); i >= 0 {
				end = start + i
			}
			for end > start && text[end-1] == '\\' {
				end--
			}
			if end <= start {
				continue
			}
		}
		secret := text[start:end]
		if r.nested && nameAndSeparator(secret) {
			spans = r.find(text[start:], off+start, spans)
			continue
		}
		if secret == Redacted || r.entropy > 0 && shannonEntropy(secret) <= r.entropy || r.check != nil && !r.check(secret, start > 0 && strings.ContainsRune(`"'\x60`, rune(text[start-1])), text[m[0]:m[1]]) {
			continue
		}
		spans = append(spans, span{off + start, off + end})
	}
	return spans
}

func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; 'A' <= c && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// kwScan is keywordHits' tables, kept between calls in scanPool (Redact
// runs on every write).
type kwScan struct {
	hits   [][]int // keyword index -> where it starts in the text
	found  []int   // the keywords hit (each once)
	ruleOn []bool  // rule index -> one of its keywords is hit
	todo   []int   // the rules to run: those hit and the unkeyed ones, in rule order
}

var scanPool = sync.Pool{New: func() any {
	return &kwScan{hits: make([][]int, len(kwTable)), ruleOn: make([]bool, len(rules))}
}}

// scan sets the keywords lower holds and the rules to run: those naming
// one of them and those without keywords (what the last scan set is
// cleared first: a text hits few of the hundreds of keywords, and the
// rules loop reads those few rules only).
func (ks *kwScan) scan(lower string) {
	for _, k := range ks.found {
		ks.hits[k] = ks.hits[k][:0]
		for _, r := range kwRules[k] {
			ks.ruleOn[r] = false
		}
	}
	ks.found = ks.found[:0]
	ks.todo = append(ks.todo[:0], unkeyed...)
	keywordHits(lower, ks.hits, func(k int) {
		ks.found = append(ks.found, k)
		for _, r := range kwRules[k] {
			if !ks.ruleOn[r] && rules[r].line == nil {
				ks.ruleOn[r] = true
				ks.todo = append(ks.todo, r)
			}
		}
	})
	slices.Sort(ks.todo)
}

// keywordHits finds every keyword in lower in one pass: a slot per pair of
// first bytes, then a prefix test for the keywords starting with the pair.
// It appends to hits (one entry per keyword, empty on entry) and calls
// first for a keyword's first hit.
func keywordHits(lower string, hits [][]int, first func(k int)) {
	for i := 0; i+1 < len(lower); i++ {
		slot := kwPairs[uint16(lower[i])<<8|uint16(lower[i+1])]
		if slot == 0 {
			continue
		}
		for _, k := range kwByPair[slot] {
			if strings.HasPrefix(lower[i:], kwTable[k]) {
				if len(hits[k]) == 0 {
					first(k)
				}
				hits[k] = append(hits[k], i)
			}
		}
	}
}

// shannonEntropy is gitleaks' measure (bits per character).
func shannonEntropy(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	var h float64
	n := float64(len(s))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

func bearerLike(v string, _ bool, _ string) bool {
	return len(v) >= 24 || strings.ContainsAny(v, "0123456789")
}

// placeholders are values that stand for a secret without being one.
var placeholders = map[string]bool{
	"": true, "null": true, "nil": true, "none": true, "true": true, "false": true, "undefined": true,
	"required": true, "optional": true, "string": true, "str": true, "[]byte": true, "bool": true, "int": true,
	"xxx": true, "xxxx": true, "***": true, "****": true, "redacted": true, "<redacted>": true,
	"env": true, "secret": true, "token": true, "password": true, "yes": true, "no": true, "0": true, "1": true,
}

func notPlaceholder(v string, _ bool, _ string) bool {
	t := strings.ToLower(strings.Trim(v, `"'\`))
	if placeholders[t] || strings.Contains(t, Redacted) {
		return false
	}
	// ${VAR}, $VAR, {{ .Secret }}, <your-token>, %VAR%
	if strings.HasPrefix(t, "$") || strings.HasPrefix(t, "%") && len(t) <= 3 || strings.HasPrefix(t, "{{") || strings.HasPrefix(t, "<") && strings.HasSuffix(t, ">") || strings.HasPrefix(t, "%") && strings.HasSuffix(t, "%") {
		return false
	}
	return true
}

// assignedSecret rejects what an assignment's value is when it is code or a
// placeholder rather than a secret: a function call, a field or variable
// reference (cfg.Token, os.Getenv), a type, a number.
func assignedSecret(v string, quoted bool, match string) bool {
	if !notPlaceholder(v, quoted, match) || !secretName(match) {
		return false
	}
	if name := strings.ToLower(strings.TrimLeft(match, "\"'\\ \t{,")); strings.HasPrefix(name, "pass") && !strings.HasPrefix(name, "passw") && !strings.HasPrefix(name, "passp") && !strings.HasPrefix(name, "passc") || strings.HasPrefix(name, "pw") && !strings.HasPrefix(name, "pwd") {
		if !passAssigned(v, quoted, match) {
			return false
		}
	}
	if quoted {
		return true // a quoted literal is a value
	}
	if strings.ContainsAny(v, "()[]{}") {
		return false
	}
	if isNumber(v) {
		return false
	}
	// "token: without one", "pass: the cursor": a colon and a plain
	// lower-case word is prose
	if sep := strings.TrimRight(match[:strings.LastIndex(match, v)], " \t"); strings.HasSuffix(sep, ":") && len(v) < 12 && strings.Trim(v, "abcdefghijklmnopqrstuvwxyz") == "" {
		return false
	}
	// a dotted identifier chain: cfg.Secret, r.Header, os.Stdin
	if strings.Contains(v, ".") && isIdentChain(v) {
		return false
	}
	return true
}

// notSecretSuffix: a credential name ending in one of these names something
// about the secret (secret_name: engram-redis, token_type: bearer,
// password_min_length: 12), not the secret.
var notSecretSuffix = map[string]bool{
	"name": true, "names": true, "file": true, "files": true, "path": true, "dir": true, "url": true, "uri": true,
	"endpoint": true, "id": true, "ids": true, "ref": true, "type": true, "kind": true, "length": true, "len": true,
	"size": true, "count": true, "limit": true, "max": true, "min": true, "ttl": true, "expiry": true, "expires": true,
	"timeout": true, "header": true, "field": true, "env": true, "var": true, "policy": true, "rotation": true,
	"hint": true, "prompt": true, "label": true, "version": true, "mode": true, "format": true, "algorithm": true,
	"algo": true, "store": true, "provider": true, "source": true, "manager": true, "backend": true, "budget": true,
	"usage": true, "prefix": true, "enabled": true, "required": true, "scope": true, "scopes": true, "location": true,
}

// secretName reports whether an assignment's name (the match up to its
// separator) names a secret rather than something about it.
func secretName(match string) bool {
	match = strings.TrimLeft(match, "\"'\\ \t{,")
	i := strings.IndexFunc(match, func(c rune) bool {
		return c == '=' || c == ':' || c == '"' || c == '\'' || c == '\\' || c == ' ' || c == '\t'
	})
	if i < 0 {
		return true
	}
	name := strings.ToLower(strings.TrimLeft(match[:i], "-."))
	if j := strings.LastIndexAny(name, "_.-"); j >= 0 {
		return !notSecretSuffix[name[j+1:]]
	}
	for suffix := range notSecretSuffix { // camelCase: secretName, tokenType
		if len(suffix) > 2 && strings.HasSuffix(name, suffix) && len(name) > len(suffix) {
			return false
		}
	}
	return true
}

// nameAndSeparator: a value that is an assignment's name and its '=' or
// ':' (API_KEY=), the start of an assignment of its own.
func nameAndSeparator(v string) bool {
	if len(v) < 2 || !strings.ContainsAny(v[len(v)-1:], "=:") {
		return false
	}
	return isIdentChain(strings.ReplaceAll(strings.TrimRight(v[:len(v)-1], " \t"), "-", "_"))
}

func isNumber(v string) bool {
	for _, c := range v {
		if (c < '0' || c > '9') && c != '.' && c != '_' {
			return false
		}
	}
	return len(v) < 6 // a long digit string may well be a PIN or key
}

func isIdentChain(v string) bool {
	for part := range strings.SplitSeq(v, ".") {
		if part == "" {
			return false
		}
		for i, c := range part {
			if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
				return false
			}
		}
	}
	return true
}

// proseWords follow "password is" in prose without being a password.
var proseWords = map[string]bool{
	"required": true, "wrong": true, "incorrect": true, "correct": true, "invalid": true, "empty": true, "missing": true,
	"set": true, "not": true, "too": true, "stored": true, "the": true, "a": true, "an": true, "being": true, "still": true,
	"expired": true, "changed": true, "reset": true, "hashed": true, "encrypted": true, "never": true, "only": true,
	"now": true, "in": true, "on": true, "at": true, "sent": true, "used": true, "needed": true, "optional": true,
	"weak": true, "strong": true, "long": true, "short": true, "case-sensitive": true, "saved": true, "kept": true,
	"same": true, "different": true, "fine": true, "ok": true, "okay": true, "good": true, "bad": true, "valid": true,
	"rotated": true, "updated": true, "generated": true, "checked": true, "verified": true, "accepted": true,
	"rejected": true, "locked": true, "unknown": true, "given": true, "shown": true, "hidden": true, "masked": true,
	"read": true, "taken": true, "what": true, "which": true, "that": true, "this": true, "it": true, "your": true,
	"my": true, "his": true, "her": true, "their": true, "our": true, "also": true, "then": true, "of": true, "to": true,
	"and": true, "or": true, "for": true, "with": true, "by": true, "from": true, "is": true, "was": true, "be": true,
}

// proseValue is the value after a password word in prose: quoted (also in
// guillemets and CJK quotes) or a run without spaces.
const proseValue = `(?:"([^"\r\n]+)"|'([^'\r\n]+)'|«\s*([^»\r\n]+?)\s*»|「([^」\r\n]+)」|([^\s"'\x60\\«「]+))`

// secretish accepts a value in prose that looks like a secret: at least 4
// digits, or 6 characters with a digit, a symbol or a capital inside, or 16
// characters; never a placeholder. "Mein Passwort ist abgelaufen" keeps its
// word.
func secretish(v string, quoted bool, match string) bool {
	v = strings.TrimRight(v, ".,;:!?)。、，")
	if !notPlaceholder(v, quoted, match) || strings.Contains(v, Redacted) {
		return false
	}
	n := utf8.RuneCountInString(v)
	digits, symbols, inner := 0, 0, false
	for i, r := range v {
		switch {
		case unicode.IsDigit(r):
			digits++
		case unicode.IsUpper(r):
			inner = inner || i > 0
		case !unicode.IsLetter(r):
			symbols++
		}
	}
	switch {
	case digits == n:
		return n >= 4
	case n >= 16:
		return true
	}
	return n >= 6 && (digits > 0 || symbols > 0 || inner)
}

// secretLike is secretish for words that are not only passwords (a token,
// a key): 8 characters with letters and digits, or 24.
func secretLike(v string, quoted bool, match string) bool {
	v = strings.TrimRight(v, ".,;:!?)")
	if !secretish(v, quoted, match) {
		return false
	}
	n := utf8.RuneCountInString(v)
	return n >= 8 && lettersAndDigits(v) || n >= 24
}

// lettersAndDigits: v holds at least one letter and one digit.
func lettersAndDigits(v string) bool {
	letters, digits := false, false
	for _, r := range v {
		if unicode.IsDigit(r) {
			digits = true
		} else if unicode.IsLetter(r) {
			letters = true
		}
		if letters && digits {
			return true
		}
	}
	return false
}

func proseSecret(v string, quoted bool, match string) bool {
	t := strings.ToLower(strings.TrimRight(v, ".,;:!?)"))
	if !quoted && (proseWords[t] || strings.ContainsAny(t, "()[]{}")) || !notPlaceholder(t, quoted, match) {
		return false
	}
	return len(t) >= 4
}

// passAssigned: the value of an assignment to a bare "pass" or "pw" looks
// like a password.
func passAssigned(v string, quoted bool, match string) bool {
	if !secretish(v, quoted, match) {
		return false
	}
	// "this pass: confirm_similar" is prose: after a colon, an unquoted
	// value needs letters and digits
	sep := strings.TrimRight(match[:strings.LastIndex(match, v)], " \t\"'\\")
	return quoted || !strings.HasSuffix(sep, ":") || spacedPassword(v, quoted, match)
}

// spacedPassword: after a password's name and a space, a value of 8 or
// more characters with letters and digits ("password reset" is prose).
func spacedPassword(v string, quoted bool, match string) bool {
	v = strings.TrimRight(v, ".,;:!?)")
	if !notPlaceholder(v, quoted, match) || proseWords[strings.ToLower(v)] || strings.ContainsAny(v, "()[]{}<>") {
		return false
	}
	return utf8.RuneCountInString(v) >= 8 && lettersAndDigits(v)
}

// spacedKey: after a key's or a token's name and a space, a generated
// value: 16 token characters with 3 digits or more, or 24 with upper and
// lower case and digits ("token bucket-algorithm-v2" is a name).
func spacedKey(v string, quoted bool, match string) bool {
	v = strings.TrimRight(v, ".,;:!?)")
	if !notPlaceholder(v, quoted, match) || len(v) < 16 {
		return false
	}
	upper, lower, digits := 0, 0, 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case '0' <= c && c <= '9':
			digits++
		case 'a' <= c && c <= 'z':
			lower++
		case 'A' <= c && c <= 'Z':
			upper++
		case !strings.ContainsRune("_-./+=~:", rune(c)):
			return false
		}
	}
	return upper+lower > 0 && (digits >= 3 || len(v) >= 24 && upper > 0 && lower > 0 && digits > 0)
}

// passphraseStop are words that make a run after "password is" a sentence
// rather than a passphrase.
var passphraseStop = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`the a an and or but nor to of in on at for with by from into onto about as if then than
		when where which who whom whose what how why all any some each every no not never always also only now still again just
		very too so is are was were be been being am it its this that these those my your his her their our we you he she they
		me him them us can will would should could must may might has have had do does did same new old here there set stored
		saved written used needed required kept sent shown given changed reset rotated expired hashed encrypted`) {
		passphraseStop[w] = true
	}
}

// wordsPassphrase: 4 to 8 lower-case words of which none (but the first)
// is a word of a sentence and at most one reads as a participle, or, after
// a seed or recovery phrase's name, 12 to 24 words of 3 to 8 letters.
func wordsPassphrase(v string, _ bool, match string) bool {
	words := strings.Fields(v)
	for _, w := range words {
		if len(w) < 2 || len(w) > 10 {
			return false
		}
	}
	m := strings.ToLower(match)
	if strings.Contains(m, "seed") || strings.Contains(m, "recovery") || strings.Contains(m, "mnemonic") || strings.Contains(m, "backup phrase") || strings.Contains(m, "secret phrase") {
		if len(words) < 12 || len(words) > 24 {
			return false
		}
		for _, w := range words {
			if len(w) < 3 || len(w) > 8 {
				return false
			}
		}
		return true
	}
	if len(words) < 4 || len(words) > 8 || passphraseStop[words[0]] {
		return false
	}
	inflected := 0
	for i, w := range words {
		if i > 0 && passphraseStop[w] || strings.HasSuffix(w, "ly") {
			return false
		}
		if strings.HasSuffix(w, "ed") || strings.HasSuffix(w, "ing") {
			inflected++
		}
	}
	return inflected <= 1
}

// pgpassShape: a line of one word with four colons or more.
func pgpassShape(line string) bool {
	if strings.Count(line, ":") < 4 {
		return false
	}
	return !strings.ContainsAny(strings.TrimSpace(line), " \t")
}

// pgpassSecret: a .pgpass password, not the last group of a MAC or IPv6
// address (hex digits and colons only).
func pgpassSecret(v string, quoted bool, match string) bool {
	return len(v) >= 4 && notPlaceholder(v, quoted, match) && strings.Trim(strings.TrimSpace(match), "0123456789abcdefABCDEF:") != ""
}

// codeList: the first code has 4 digits, or 6 characters with a digit.
func codeList(v string, _ bool, _ string) bool {
	first, _, _ := strings.Cut(v, " ")
	first = strings.TrimRight(first, ",;")
	digits := 0
	for i := 0; i < len(first); i++ {
		if '0' <= first[i] && first[i] <= '9' {
			digits++
		}
	}
	return digits >= 4 || len(first) >= 6 && digits > 0
}

// twilioShape: SK or AC and 32 lower-case hex digits.
func twilioShape(line string) bool {
	for i := 0; i+34 <= len(line); i++ {
		if (line[i] == 'S' && line[i+1] == 'K' || line[i] == 'A' && line[i+1] == 'C') && isHex(line[i+2:i+34]) {
			return true
		}
	}
	return false
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// discordShape: M, N or O, 23 to 31 token characters, a dot.
func discordShape(line string) bool {
	k := 0
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-':
			k++
		case c == '.' && k >= 24 && k <= 32 && strings.ContainsRune("MNO", rune(line[i-k])):
			return true
		default:
			k = 0
		}
	}
	return false
}

// hasDigitRun reports whether a line has 13 digits with at most single spaces
// or dashes between them (a card number's shape), cheaply.
func hasDigitRun(line string) bool {
	n, sep := 0, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case '0' <= c && c <= '9':
			n++
			sep = false
			if n >= 13 {
				return true
			}
		case (c == ' ' || c == '-') && n > 0 && !sep:
			sep = true
		default:
			n, sep = 0, false
		}
	}
	return false
}

// luhnCard accepts 13 to 19 digits (separators aside) passing the Luhn check.
func luhnCard(v string, _ bool, _ string) bool {
	var digits []int
	for _, c := range v {
		if '0' <= c && c <= '9' {
			digits = append(digits, int(c-'0'))
		}
	}
	if len(digits) < 13 || len(digits) > 19 {
		return false
	}
	sum := 0
	for i := range digits {
		d := digits[len(digits)-1-i]
		if i%2 == 1 {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return sum%10 == 0
}
