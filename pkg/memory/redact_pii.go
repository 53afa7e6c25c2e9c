package memory

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// PII redaction is an option per tenant (ENGRAM_REDACT_PII), off by
// default: unlike a secret, an e-mail address or a phone number is often
// what the user wants remembered ("send the invoices to
// billing@example.com"). A tenant that turns it on gets, on every write
// (node text, paths and entities, transcripts, summaries), after the
// secrets:
//   - e-mail addresses -> [email];
//   - phone numbers: international (+ and 8 to 15 digits), North American
//     ((555) 123-4567, 555-123-4567), or any run of 7 to 15 digits after a
//     word for a phone (phone, tel, mobile, Telefon, téléphone, teléfono,
//     telefone, telefono, telefoon, телефон, 电话, 電話, telepon, HP) ->
//     [phone];
//   - IBANs, their ISO 7064 mod-97 check passing -> [iban];
//   - national ids whose check can be verified -> [national id]: US social
//     security numbers (area, group and serial rules), Spanish DNI and NIE
//     (check letter), Dutch BSN (11-test, after "BSN"), Brazilian CPF (two
//     check digits), Chinese resident ids (ISO 7064 MOD 11-2 and a birth
//     date), French NIR (mod-97 key), UK national insurance numbers (the
//     allowed prefixes).
// A number that fails its check is left alone, so that order numbers,
// versions and ids of other kinds keep their digits.

// PII markers.
const (
	PIIEmail      = "[email]"
	PIIPhone      = "[phone]"
	PIIIBAN       = "[iban]"
	PIINationalID = "[national id]"
)

// AllTenants in the tenant list of SetPIIRedaction turns it on for every
// tenant; DefaultTenantName names the default tenant (id "").
const (
	AllTenants        = "*"
	DefaultTenantName = "default"
)

type piiPolicy struct {
	all     bool
	tenants map[string]bool
}

var pii atomic.Pointer[piiPolicy]

// SetPIIRedaction sets the tenants whose writes have their personal data
// redacted (AllTenants: every tenant; DefaultTenantName: the default
// tenant; none: off). It is set once at start, before the store is used;
// an invalid tenant id is an error and changes nothing.
func SetPIIRedaction(tenants []string) error {
	if err := CheckPIITenants(tenants); err != nil {
		return err
	}
	p := &piiPolicy{tenants: map[string]bool{}}
	for _, t := range tenants {
		t = strings.TrimSpace(t)
		switch t {
		case "":
			continue
		case AllTenants:
			p.all = true
		case DefaultTenantName:
			p.tenants[""] = true
		default:
			p.tenants[t] = true
		}
	}
	pii.Store(p)
	return nil
}

// CheckPIITenants validates a tenant list of SetPIIRedaction, naming every
// bad entry.
func CheckPIITenants(tenants []string) error {
	var errs []string
	for _, t := range tenants {
		t = strings.TrimSpace(t)
		if t == "" || t == AllTenants || t == DefaultTenantName {
			continue
		}
		if err := CheckTenant(t); err != nil {
			errs = append(errs, fmt.Sprintf("%q: %v", t, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: PII redaction tenants: %s", ErrInvalid, strings.Join(errs, "; "))
	}
	return nil
}

// PIIRedacted reports whether tenant's writes have their personal data
// redacted.
func PIIRedacted(tenant string) bool {
	p := pii.Load()
	return p != nil && (p.all || p.tenants[tenant])
}

// redactFor is what every write of tenant's text goes through: Redact, then
// RedactPII when the tenant asked for it.
func redactFor(tenant, s string) string {
	s = Redact(s)
	if PIIRedacted(tenant) {
		s = RedactPII(s)
	}
	return s
}

// piiPaths and piiEntities apply RedactPII to normalised paths and
// entities of tenant, when it asked for it.
func piiPaths(tenant string, paths []string) []string {
	if !PIIRedacted(tenant) || len(paths) == 0 {
		return paths
	}
	out := paths[:0]
	for _, p := range paths {
		if p = RedactPII(p); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func piiEntities(tenant string, es []Entity) []Entity {
	if !PIIRedacted(tenant) || len(es) == 0 {
		return es
	}
	out := es[:0]
	for _, e := range es {
		e.Key, e.Name = RedactPII(e.Key), RedactPII(e.Name)
		if !slices.ContainsFunc(out, func(o Entity) bool { return o.Key == e.Key }) {
			out = append(out, e)
		}
	}
	return out
}

type piiRule struct {
	re     *regexp.Regexp
	group  int // the group holding the value (0: the whole match)
	marker string
	valid  func(v string) bool
}

var piiRules = []piiRule{
	{re: regexp.MustCompile(`(?i)(?:^|[^\w.%+\-/:])([a-z0-9][a-z0-9._%+\-]{0,63}@[a-z0-9](?:[a-z0-9\-]{0,62}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9\-]{0,62}[a-z0-9])?)*\.[a-z]{2,24})\b`),
		group: 1, marker: PIIEmail},
	{re: regexp.MustCompile(`(?:^|[^\w+])(\+[1-9][0-9 ().\-]{6,22}[0-9])`), group: 1, marker: PIIPhone, valid: digitCount(8, 15)},
	{re: regexp.MustCompile(`(?:^|[^\w(])(\(\d{3}\)\s?\d{3}[\s.\-]\d{4}|\d{3}[.\-]\d{3}[.\-]\d{4})\b`), group: 1, marker: PIIPhone, valid: digitCount(10, 10)},
	{re: regexp.MustCompile(`(?i)(?:phone|tel|mobile|mobil|cell|handy|telefon|téléphone|telephone|teléfono|telefono|telefone|telefoon|телефон|тел|电话|電話|手机|telepon|hp|wa)\.?(?:\s*(?:number|no|nr|nummer|numéro|número|numero|nomor))?\.?\s*[:：]?\s*(\+?[0-9][0-9 ().\-/]{5,22}[0-9])`),
		group: 1, marker: PIIPhone, valid: digitCount(7, 15)},
	{re: regexp.MustCompile(`\b([A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?)\b`), group: 1, marker: PIIIBAN, valid: ibanValid},
	{re: regexp.MustCompile(`\b(\d{3}-\d{2}-\d{4})\b`), group: 1, marker: PIINationalID, valid: ssnValid},
	{re: regexp.MustCompile(`(?i)(?:ssn|social security(?: number| no\.?)?)\s*[:#]?\s*(\d{9})\b`), group: 1, marker: PIINationalID, valid: ssnValid},
	{re: regexp.MustCompile(`\b([0-9]{8}-?[A-Z]|[XYZ]-?[0-9]{7}-?[A-Z])\b`), group: 1, marker: PIINationalID, valid: dniValid},
	{re: regexp.MustCompile(`(?i)(?:bsn|burgerservicenummer)\s*[:#]?\s*(\d{9})\b`), group: 1, marker: PIINationalID, valid: bsnValid},
	{re: regexp.MustCompile(`\b(\d{3}\.\d{3}\.\d{3}-\d{2})\b`), group: 1, marker: PIINationalID, valid: cpfValid},
	{re: regexp.MustCompile(`(?i)cpf\s*[:#]?\s*(\d{11})\b`), group: 1, marker: PIINationalID, valid: cpfValid},
	{re: regexp.MustCompile(`\b(\d{17}[0-9Xx])\b`), group: 1, marker: PIINationalID, valid: chinaIDValid},
	{re: regexp.MustCompile(`\b([12] ?\d{2} ?(?:0[1-9]|1[0-2]|[2-9]\d) ?(?:\d{2}|2[AB]) ?\d{3} ?\d{3} ?\d{2})\b`), group: 1, marker: PIINationalID, valid: nirValid},
	{re: regexp.MustCompile(`\b([A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D])\b`), group: 1, marker: PIINationalID, valid: ninoValid},
}

// RedactPII replaces the personal data it finds in s (see above) with its
// marker. It is idempotent.
func RedactPII(s string) string {
	for _, r := range piiRules {
		ms := r.re.FindAllStringSubmatchIndex(s, -1)
		if len(ms) == 0 {
			continue
		}
		var b strings.Builder
		last := 0
		for _, m := range ms {
			a, e := m[2*r.group], m[2*r.group+1]
			if a < 0 || a < last {
				continue
			}
			v := s[a:e]
			if r.valid != nil && !r.valid(v) {
				continue
			}
			if r.marker == PIIEmail && e < len(s) && s[e] == ':' {
				continue // user@host:path is an scp or git address
			}
			b.WriteString(s[last:a])
			b.WriteString(r.marker)
			last = e
		}
		if last > 0 {
			b.WriteString(s[last:])
			s = b.String()
		}
	}
	return s
}

func digitsOf(v string) string {
	var b strings.Builder
	for _, c := range v {
		if '0' <= c && c <= '9' {
			b.WriteRune(c)
		}
	}
	return b.String()
}

func digitCount(lo, hi int) func(string) bool {
	return func(v string) bool {
		n := len(digitsOf(v))
		return n >= lo && n <= hi
	}
}

// ibanValid: 15 to 34 characters, ISO 7064 mod 97 of the rearranged number
// is 1.
func ibanValid(v string) bool {
	v = strings.ReplaceAll(v, " ", "")
	if len(v) < 15 || len(v) > 34 {
		return false
	}
	r := v[4:] + v[:4]
	mod := 0
	for _, c := range r {
		switch {
		case '0' <= c && c <= '9':
			mod = (mod*10 + int(c-'0')) % 97
		case 'A' <= c && c <= 'Z':
			mod = (mod*100 + int(c-'A'+10)) % 97
		default:
			return false
		}
	}
	return mod == 1
}

// ssnValid: area not 000, 666 or 9xx; group not 00; serial not 0000.
func ssnValid(v string) bool {
	d := digitsOf(v)
	if len(d) != 9 {
		return false
	}
	area, group, serial := d[:3], d[3:5], d[5:]
	return area != "000" && area != "666" && area[0] != '9' && group != "00" && serial != "0000"
}

// dniValid: the check letter of a Spanish DNI (8 digits) or NIE (X, Y or Z
// and 7 digits).
func dniValid(v string) bool {
	v = strings.ReplaceAll(v, "-", "")
	num := v[:len(v)-1]
	switch num[0] {
	case 'X':
		num = "0" + num[1:]
	case 'Y':
		num = "1" + num[1:]
	case 'Z':
		num = "2" + num[1:]
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return false
	}
	return "TRWAGMYFPDXBNJZSQVHLCKE"[n%23] == v[len(v)-1]
}

// bsnValid: the Dutch 11-test.
func bsnValid(v string) bool {
	if len(v) != 9 {
		return false
	}
	sum := 0
	for i := range 8 {
		sum += int(v[i]-'0') * (9 - i)
	}
	sum -= int(v[8] - '0')
	return sum%11 == 0 && sum != 0
}

// cpfValid: the two check digits of a Brazilian CPF (not all one digit).
func cpfValid(v string) bool {
	d := digitsOf(v)
	if len(d) != 11 || strings.Count(d, d[:1]) == 11 {
		return false
	}
	check := func(n int) int {
		sum := 0
		for i := range n {
			sum += int(d[i]-'0') * (n + 1 - i)
		}
		r := sum * 10 % 11
		if r == 10 {
			r = 0
		}
		return r
	}
	return check(9) == int(d[9]-'0') && check(10) == int(d[10]-'0')
}

// chinaIDValid: an 18-character resident id: a birth date from 1900 to
// today at 7-14, ISO 7064 MOD 11-2 check character.
func chinaIDValid(v string) bool {
	v = strings.ToUpper(v)
	birth, err := time.Parse("20060102", v[6:14])
	if err != nil || birth.Year() < 1900 || birth.After(time.Now()) {
		return false
	}
	weights := []int{7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2}
	sum := 0
	for i, w := range weights {
		sum += int(v[i]-'0') * w
	}
	return "10X98765432"[sum%11] == v[17]
}

// nirValid: a French social security number: the key is 97 minus the
// number mod 97 (Corsica's 2A and 2B counted as 19 and 18).
func nirValid(v string) bool {
	v = strings.ReplaceAll(v, " ", "")
	if len(v) != 15 {
		return false
	}
	num, key := v[:13], v[13:]
	num = strings.NewReplacer("2A", "19", "2B", "18").Replace(num)
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return false
	}
	k, err := strconv.Atoi(key)
	return err == nil && k == int(97-n%97)
}

// ninoValid: a UK national insurance number without the prefixes never
// issued (BG, GB, KN, NK, NT, TN, ZZ).
func ninoValid(v string) bool {
	v = strings.ReplaceAll(v, " ", "")
	return !slices.Contains([]string{"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"}, v[:2])
}
