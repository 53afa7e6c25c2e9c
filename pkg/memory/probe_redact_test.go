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

// Ordinary sentences near each rule that closes the probe's findings: a
// bare "pass" or "pw" assigned, a password's or a key's name and a value
// after a space, passphrases of words, .pgpass lines, 2FA codes. None may
// change (a rule too broad fails here).
func TestProbeRedactOrdinary(t *testing.T) {
	for _, s := range []string{
		// pass=, pw:
		"pass: the cursor moves on to the next batch", "this pass: confirm_similar is honoured only once", "pass=1", "pass = true",
		"pass := getPass()", "compass=north", "pw: see vault", "bypass=false in the test config",
		// name, space, value
		"password reset links expire after an hour", "PASSWORD HASHING uses argon2id", "passwd deploy changes that user's password",
		"the password manager v2 is rolled out", "the token bucket-algorithm-v2 limits requests", "api key rotation happens every 90 days",
		"secret santa 2024 is on Friday", "access token lifetime is 3600 seconds", "private key generation uses ed25519",
		// passphrases of words
		"the password is stored encrypted using bcrypt hashing", "the password is never written to disk", "the wifi password is on the fridge",
		"my password is too short for the new policy", "the password is correct and login works now", "the password is rotated monthly by vault",
		"my seed phrase is written on paper in the safe", "the recovery phrase is shown once during setup", "The password policy: minimum twelve characters long",
		// .pgpass
		"10:20:30:40:50", "aa:bb:cc:dd:ee:ff", "00:1a:2b:3c:4d:5e", "fe80::1:2:3:4", "root:x:0:0:root:/root:/bin/bash",
		"localhost:5432:*:*:*", "a:b:c:d:e", "std::vector<int>::iterator::value",
		// 2FA codes
		"backup codes are printed once, keep them safe", "the verification code expires in 10 minutes", "security code review 2024",
		"recovery codes: 10 of them are generated", "2FA codes are required for admins", "backup code 2 was used",
	} {
		if out := memory.Redact(s); out != s {
			t.Errorf("ordinary %q -> %q", s, out)
		}
	}
}

// The same forms written anew: the rules are general, not the probe's
// payloads.
func TestProbeRedactsVariants(t *testing.T) {
	for _, c := range []struct{ text, secret string }{
		{"pw: S3cretPassw0rd", "S3cretPassw0rd"},
		{`PASS="tr0ub4dor&3"`, "tr0ub4dor&3"},
		{"Password Tr0ub4dorAnd3x for the NAS", "Tr0ub4dorAnd3x"},
		{"stripe secret key 9f8a7d6c5b4a3f2e1d0c9b8a", "9f8a7d6c5b4a3f2e1d0c9b8a"},
		{"the refresh token 1//0gLx8Hq3kT2vYb9Zr", "1//0gLx8Hq3kT2vYb9Zr"},
		{"the vault passphrase was purple monkey dishwasher lantern.", "purple monkey dishwasher lantern"},
		{"recovery phrase: legal winner thank year wave sausage worth useful legal winner thank yellow", "legal winner thank year"},
		{"app.example:5432:*:deploy:Zx9-q!w2e", "Zx9-q!w2e"},
		{"10.1.2.3:6432:billing:svc:n0t-s0-s3cret", "n0t-s0-s3cret"},
		{"recovery codes: 7hk2-99xq, 3mm8-12ab", "3mm8-12ab"},
		{"GitHub 2FA recovery codes 4f9a1-c27d0 8b3e6-a1f4c", "8b3e6-a1f4c"},
	} {
		if got := memory.Redact(c.text); strings.Contains(got, c.secret) {
			t.Errorf("Redact(%q) = %q keeps %q", c.text, got, c.secret)
		}
	}
}

// Passwords in prose in the languages the probe found outside the list (tr,
// pl, sv, vi, ar, hi) and el; ordinary sentences about passwords in them
// stay.
func TestProbeRedactsMoreLanguages(t *testing.T) {
	for _, c := range []struct{ text, secret string }{
		{"Wi-Fi şifresi: Kedi2024!x", "Kedi2024!x"},
		{"şifrem Ankara1923x", "Ankara1923x"},
		{"Moje hasło to Zubr_77wod", "Zubr_77wod"},
		{"hasło do routera: Krak0w!99", "Krak0w!99"},
		{"Mitt lösenord är Sommar2024!", "Sommar2024!"},
		{"lösenordet till routern är Gr0da-77", "Gr0da-77"},
		{"mật khẩu của tôi là HaNoi2024@", "HaNoi2024@"},
		{"كلمة المرور هي Qamar2024x!", "Qamar2024x!"},
		{"मेरा पासवर्ड Dilli2024x है", "Dilli2024x"},
		{"ο κωδικός μου είναι Athina2024!", "Athina2024!"},
	} {
		if got := memory.Redact(c.text); strings.Contains(got, c.secret) {
			t.Errorf("Redact(%q) = %q keeps %q", c.text, got, c.secret)
		}
	}
	for _, s := range []string{
		"Şifre sıfırlama bağlantısı bir saat geçerlidir.", "Şifremi unuttum, yeni bir tane istedim.", "Parola politikası değişti.",
		"Hasło jest za krótkie.", "Zmień hasło co kwartał.", "Mitt lösenord är för kort.", "Lösenordet måste bytas varje år.",
		"Mật khẩu của tôi là bí mật.", "Mật khẩu phải dài ít nhất mười hai ký tự.", "كلمة المرور قصيرة جدا.", "نسيت كلمة السر الخاصة بي.",
		"पासवर्ड बदलना ज़रूरी है।", "मेरा पासवर्ड बहुत लंबा है।", "Ο κωδικός μου είναι λάθος.", "Ο κωδικός πρέπει να αλλάξει.",
	} {
		if out := memory.Redact(s); out != s {
			t.Errorf("ordinary %q -> %q", s, out)
		}
	}
}
