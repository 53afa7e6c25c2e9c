// Package neutralisetest holds the attack corpus and the ordinary-text
// corpus of memory.Neutralise, and the checker that says what of an attack
// survives in a rendered text, for the tests of every path that puts
// memory text into a prompt or a block (the memory block, the extractor's,
// the consolidator's and the compactor's prompts, the compacted-context
// block, the `memory` tool's answers).
//
// The checker is written apart from the neutraliser, from the definition
// of "neutralised": after rendering, reading the text as a model would
// (entities and escapes decoded, NFKC, the TR39 skeleton of
// go.mau.fi/util/confusable applied to the whole text, case and
// whitespace ignored), it holds
//   - no tag that opens or closes a block (</engram-memory>, </transcript>)
//     or a role (<system>, <user>, <s>);
//   - no chat-template token (<|im_start|>, im_start, [INST], <<SYS>>,
//     start_of_turn ...);
//   - no role marker: a role word followed by a colon, anywhere in a line
//     for system, assistant, user, human, developer and their translations,
//     at the start of a line for ai, model, tool, instruction, response,
//     and no "### Instruction" heading;
//   - no override: an override verb followed (or, in de, ja, ko and zh,
//     preceded) within a few words by what it overrides, in any of the
//     languages of the corpus, also with its letters spaced out, reversed
//     or in ROT13;
//   - no fake header (STANDING INSTRUCTIONS, RECALLED CONTEXT, "NEW
//     INSTRUCTIONS:" and its translations);
//   - no external image (markdown image, <img>, <iframe>), no markdown link
//     whose URL carries a query, and no order to send secrets to a URL;
//   - no stealth order ("do not tell the user", "secretly add") and no
//     role-play takeover ("you are now DAN", "developer mode enabled",
//     "reveal your system prompt").
//
// It is deliberately coarser than the neutraliser (co-occurrence rather
// than phrases), so that a phrase the neutraliser misses is seen.
package neutralisetest

import (
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"html"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"go.mau.fi/util/confusable"
	"golang.org/x/text/unicode/norm"
)

//go:embed attacks.txt
var attacksFile string

//go:embed ordinary.txt
var ordinaryFile string

// Attack is one payload of the corpus.
type Attack struct {
	Family string // tag, role, template, override-<lang>, encoding, header, exfil, stealth, roleplay
	Text   string
}

// Attacks returns the attack corpus.
func Attacks() []Attack {
	var out []Attack
	for i, line := range strings.Split(attacksFile, "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fam, q, ok := strings.Cut(line, "\t")
		if !ok {
			panic("neutralisetest: attacks.txt line " + strconv.Itoa(i+1) + ": no tab")
		}
		text, err := strconv.Unquote(q)
		if err != nil {
			panic("neutralisetest: attacks.txt line " + strconv.Itoa(i+1) + ": " + err.Error())
		}
		out = append(out, Attack{Family: fam, Text: text})
	}
	return out
}

// Ordinary returns the ordinary-text corpus: memory text in en, de, fr,
// es, pt, it, nl, ru, zh, ja and id, code and markdown.
func Ordinary() []string {
	var out []string
	for _, line := range strings.Split(ordinaryFile, "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	return out
}

// sk is the checker's normal form of a literal: NFKC, lower case, TR39
// skeleton, lower case, no combining marks.
func sk(s string) string {
	s = strings.ToLower(norm.NFKC.String(s))
	s = strings.ToLower(confusable.Skeleton(s))
	var b strings.Builder
	for _, r := range s {
		if unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf) {
			continue
		}
		b.WriteRune(r)
	}
	return norm.NFC.String(b.String())
}

var (
	escRE   = regexp.MustCompile(`\\u\{?([0-9a-fA-F]{2,6})\}?|\\x([0-9a-fA-F]{2})|%([0-9a-fA-F]{2})|\\([nrt])`)
	runRE   = regexp.MustCompile(`[A-Za-z0-9+/_\-]{16,}={0,2}`)
	spaceRE = regexp.MustCompile(`[\s\p{Zs}]+`)
)

// reading is a text as a model reads it, in the checker's forms.
type reading struct {
	n       string // normalised, whitespace collapsed (newlines kept)
	compact string // n without whitespace and - _ . separators
	letters string // letters and digits only
	bars    string // NFKC, no whitespace, no skeleton: where | is still a bar
}

func read(s string) reading {
	s = html.UnescapeString(html.UnescapeString(s))
	s = escRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := escRE.FindStringSubmatch(m)
		if sub[4] != "" {
			return map[string]string{"n": "\n", "r": " ", "t": " "}[sub[4]]
		}
		h := sub[1] + sub[2] + sub[3]
		v, err := strconv.ParseUint(h, 16, 32)
		if err != nil || v == 0 || v > unicode.MaxRune {
			return m
		}
		return string(rune(v))
	})
	// tag characters spell ASCII invisibly; other format characters go
	s = strings.Map(func(r rune) rune {
		if r >= 0xE0020 && r <= 0xE007E {
			return r - 0xE0000
		}
		if unicode.In(r, unicode.Cf) {
			return -1
		}
		return r
	}, s)
	bars := norm.NFKC.String(s)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(spaceRE.ReplaceAllString(sk(l), " "))
	}
	r := reading{n: strings.Join(lines, "\n")}
	var c, l strings.Builder
	for _, x := range r.n {
		if unicode.IsLetter(x) || unicode.IsDigit(x) {
			l.WriteRune(x)
		}
		if !unicode.IsSpace(x) && x != '-' && x != '_' && x != '.' && x != '\u2581' {
			c.WriteRune(x)
		}
	}
	r.compact, r.letters = c.String(), l.String()
	r.bars = strings.Map(func(x rune) rune {
		if unicode.IsSpace(x) {
			return -1
		}
		if x == '│' || x == '∣' || x == '¦' {
			return '|'
		}
		return x
	}, bars)
	return r
}

func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

func rot13(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z':
			return 'a' + (r-'a'+13)%26
		}
		return r
	}, s)
}

// Survives lists what of an attack out still holds in a form a model reads
// as such (nil: nothing). out is the rendered text of one memory, message
// or summary, without the fixed frame around it (block headers, the
// summary's preamble and template headings).
func Survives(out string) []string {
	found := survives(out)
	// base64 and hex runs that decode to text are read too
	for _, run := range runRE.FindAllString(out, -1) {
		for _, dec := range decodings(run) {
			for _, f := range survives(dec) {
				found = append(found, "encoded "+f)
			}
		}
	}
	return found
}

func decodings(run string) []string {
	var out []string
	if b, err := hex.DecodeString(run); err == nil && utf8.Valid(b) {
		out = append(out, string(b))
	}
	for _, e := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := e.DecodeString(run); err == nil && utf8.Valid(b) {
			out = append(out, string(b))
		}
	}
	return out
}

// leet undoes the usual digit stand-ins (after the skeleton: 1 and l are
// one letter, 0 is o).
var leet = strings.NewReplacer("l", "i", "3", "e", "4", "a", "5", "s", "7", "t", "@", "a", "$", "s", "!", "i")

func survives(out string) []string {
	c := compiled()
	r := read(out)
	var found []string
	for _, t := range c.tags {
		if strings.Contains(r.compact, t) {
			found = append(found, "tag "+t)
		}
	}
	for _, t := range c.tokens {
		if strings.Contains(r.compact, t) {
			found = append(found, "template token "+t)
		}
	}
	// bars before the skeleton (which reads | as l)
	for _, t := range []string{"<|", "|>"} {
		if strings.Contains(r.bars, t) {
			found = append(found, "template token "+t)
		}
	}
	for _, re := range c.res {
		if m := re.re.FindString(r.n); m != "" {
			found = append(found, re.what+" "+strconv.Quote(m))
		}
	}
	for _, o := range c.overrides {
		for _, form := range []struct{ name, text string }{{"", r.n}, {"letters ", r.letters}, {"reversed ", reverse(r.letters)},
			{"rot13 ", rot13(r.letters)}, {"leet ", leet.Replace(r.letters)}} {
			if (form.name != "") != o.latin {
				continue // the letters-only forms have their own expressions
			}
			if m := o.re.FindString(form.text); m != "" {
				found = append(found, form.name+"override ("+o.lang+") "+strconv.Quote(m))
			}
		}
	}
	return found
}

type namedRE struct {
	what string
	re   *regexp.Regexp
}

type overrideCheck struct {
	lang  string
	latin bool
	re    *regexp.Regexp
}

type checks struct {
	tags, tokens []string
	res          []namedRE
	overrides    []overrideCheck
}

var (
	checksOnce sync.Once
	checksVal  *checks
)

// alt is an alternation of the literals' normal forms; a space in a
// literal matches any whitespace, a trailing * any letters.
func alt(words ...string) string {
	out := make([]string, len(words))
	for i, w := range words {
		stem := strings.HasSuffix(w, "*")
		w = strings.TrimSuffix(w, "*")
		parts := strings.Fields(w)
		for j, p := range parts {
			parts[j] = regexp.QuoteMeta(sk(p))
		}
		out[i] = strings.Join(parts, `\s+`)
		if stem {
			out[i] += `\p{L}*`
		}
	}
	return `(?:` + strings.Join(out, "|") + `)`
}

func compiled() *checks {
	checksOnce.Do(func() {
		c := &checks{}
		brackets := []string{"<", "[", "{"}
		for _, b := range []string{"‹", "«", "〈", "⟨", "❮", "˂", "＜", "﹤", "❬", "《"} {
			brackets = append(brackets, sk(b))
		}
		for _, b := range brackets {
			for _, name := range []string{"/engram", "engram", "/previoussummary", "/transcript", "system>", "/system>", "systemprompt>",
				"/systemprompt>", "instructions>", "/instructions>", "user>", "/user>", "assistant>", "/assistant>", "toolcall>", "functioncalls>",
				"s>", "/s>", "invoke", "sys>", "/sys>"} {
				c.tags = append(c.tags, sk(b)+sk(name))
			}
		}
		for _, close := range []string{">", "]", "}", "›", "»", "〉", "⟩", "❯", "˃", "＞"} {
			c.tags = append(c.tags, sk("engrammemory"+close), sk("engramsummary"+close))
		}
		for _, t := range []string{"imstart", "imend", "imsep", "endoftext", "eotid", "headerid", "beginoftext", "startofturn",
			"endofturn", "beginofsentence", "[inst]", "[/inst]", "<<sys>>", "<</sys>>", "[system]", "[/system]", "[toolcalls]", "[availabletools]"} {
			c.tokens = append(c.tokens, sk(t))
		}
		add := func(what, re string) { c.res = append(c.res, namedRE{what, regexp.MustCompile(re)}) }
		// role markers
		add("role marker", `(?:^|[^\p{L}\p{N}/@.])`+alt("system", "assistant", "user", "human", "developer", "sistema", "systeme", "système",
			"sistem", "systeem", "usuario", "utilisateur", "utente", "benutzer", "nutzer", "gebruiker", "pengguna", "asistente", "assistente",
			"система", "пользователь", "ассистент")+`(?:\s*\([^()\n]{0,40}\))?\s*[*_"'»\])]*\s*:`)
		add("role marker", `(?:^|[^\p{L}\p{N}])`+alt("系统", "系統", "用户", "助手", "システム", "ユーザー", "アシスタント", "시스템", "사용자")+`\s*:`)
		add("role marker at line start", `(?m)^[\s#>*\-]*`+alt("ai", "model", "tool", "instruction", "response", "bot")+`\s*[*_]*\s*:`)
		add("role heading", `#{2,}\s*`+alt("instruction*", "response", "system"))
		// fake headers
		add("fake header", alt("standing instructions", "recalled context", "compacted context", "end of memory", "end of compacted"))
		add("fake header", alt("new", "updated", "important", "real", "hidden", "secret", "priority", "urgent")+`\s+(?:`+alt("system")+`\s+)?`+
			alt("instructions", "rules", "message", "directives")+`(?:\s+`+alt("are", "is")+`)?\s*[:\]]`)
		add("fake header", alt("system override", "system message", "system notice", "admin notice", "admin override", "security override",
			"nuevas instrucciones", "nouvelles instructions", "neue anweisungen", "novas instruções", "nuove istruzioni", "nieuwe instructies",
			"instruksi baru", "новые инструкции", "新的指令", "新指令", "新しい指示")+`\s*[:\]]`)
		// exfiltration
		add("external image", `!\s*\[[^\]\n]*\]\s*[(\[]`)
		add("embedded content", `<\s*`+alt("img", "iframe", "script")+`\b`)
		add("link with query", `<\s*a\s[^>]*href\s*=\s*["']*[^"'\s>]*//[^"'\s>]*[?#]`)
		add("link with query", `\]\s*\(\s*[^)\s]*//[^)\s]*[?#]`)
		add("order to send secrets", alt("send", "post", "upload", "forward", "email", "transmit", "exfiltrat*", "curl", "leak")+`\b[^\n]{0,100}?`+
			alt("key*", "secret*", "token*", "credential*", "password*", ".env", "id_rsa", ".aws", "transcript*", "conversation*", "environment variable*")+`[^\n]{0,100}?(?:`+alt("http", "webhook")+`|//|\S@\S+\.\S)`)
		add("secret file shipped", alt("curl", "wget", "scp", "nc")+`[^\n]{0,120}?@\s*~?\S*`+alt(".ssh", "id_rsa", ".env", ".aws", "credentials", ".netrc"))
		// stealth and role play
		add("stealth order", alt("do not", "don't", "never", "without")+`\s+`+alt("tell*", "mention*", "inform*", "notify*")+`\s+(?:\S+\s+){0,3}?`+alt("user*"))
		add("stealth order", alt("secretly", "silently", "covertly")+`\s+\p{L}`)
		add("role play", alt("you are now", "you are no longer", "you're now")+`\s+(?:\S+\s+){0,3}?`+alt("dan", "unrestricted", "developer", "jailbroken", "bound", "free", "evil"))
		add("role play", alt("developer mode", "jailbreak mode", "god mode")+`\s+(?:is\s+)?`+alt("enabled", "on", "activated"))
		add("role play", alt("do anything now", "enable jailbreak", "jailbreak mode", "unrestricted ai", "unrestricted model"))
		add("role play", alt("reveal*", "print*", "show*", "repeat*", "output*")+`\s+(?:\S+\s+){0,4}?`+alt("system prompt", "hidden instructions", "instructions you were given"))
		// overrides
		type lang struct {
			name         string
			verbs, objs  []string
			objectFirst  bool
			latin, space bool
		}
		langs := []lang{
			{"en", []string{"ignor*", "disregard*", "forget", "forgot*", "overrid*", "bypass*", "do not follow", "stop following", "pay no attention"},
				[]string{"instruction*", "prompt*", "guideline*", "directive*", "rule*", "above", "previous*", "prior", "earlier", "polic*", "restriction*", "safety", "filter*", "before this", "told", "everything", "foregoing", "preceding"}, false, true, true},
			{"es", []string{"ignor*", "olvid*", "caso omiso", "no sigas", "omit*", "descart*"}, []string{"instruc*", "indicac*", "regla*", "anterior*", "previ*", "orden*"}, false, false, true},
			{"fr", []string{"ignor*", "oubli*", "ne tiens pas compte", "ne tenez pas compte", "abstraction"}, []string{"instruction*", "consigne*", "règle*", "regle*", "précédent*", "precedent*", "antérieur*", "ci-dessus", "précède", "precede", "avant"}, false, false, true},
			{"de", []string{"ignorier*", "vergiss", "vergessen", "missacht*", "nicht beachten"}, []string{"anweisung*", "regel*", "instruktion*", "vorherig*", "bisherig*", "obig*", "vorher", "zuvor", "bisher"}, true, false, true},
			{"pt", []string{"ignor*", "esqueç*", "esquec*", "desconsider*"}, []string{"instruç*", "instruc*", "regra*", "anterior*", "acima", "antes"}, false, false, true},
			{"it", []string{"ignor*", "dimentic*", "non seguire"}, []string{"istruzion*", "regol*", "precedent*"}, false, false, true},
			{"nl", []string{"negeer*", "vergeet"}, []string{"instructie*", "regel*", "vorige", "eerdere", "bovenstaande"}, false, false, true},
			{"id", []string{"abaikan*", "lupakan*"}, []string{"instruksi*", "aturan*", "perintah*", "sebelumnya", "di atas"}, false, false, true},
			{"ru", []string{"игнор*", "проигнор*", "забуд*", "не обращай*"}, []string{"инструкц*", "указани*", "правил*", "предыдущ*", "прежн*", "ранее", "раньше"}, false, false, true},
			{"zh", []string{"忽略", "无视", "忽视", "忘记", "不要遵守"}, []string{"指令", "指示", "规则", "之前", "以上", "内容"}, true, false, false},
			{"ja", []string{"無視", "忘れ", "従わ"}, []string{"指示", "命令", "ルール", "以前", "これまで", "上記"}, true, false, false},
			{"ko", []string{"무시", "잊"}, []string{"지시", "규칙", "명령", "이전"}, true, false, false},
		}
		for _, l := range langs {
			v, o := alt(l.verbs...), alt(l.objs...)
			gap := `[^\n]{0,60}?`
			p := v + gap + o
			if l.objectFirst {
				p += `|` + o + gap + v
			}
			if l.space {
				p = `(?:^|[^\p{L}])(?:` + p + `)`
			}
			c.overrides = append(c.overrides, overrideCheck{lang: l.name, re: regexp.MustCompile(p)})
			if l.latin {
				// the letters-only forms: no spaces between the words
				lv := strings.ReplaceAll(alt(l.verbs...), `\s+`, ``)
				lo := strings.ReplaceAll(alt("instruction*", "prompt*", "guideline*", "directive*", "rules"), `\s+`, ``)
				c.overrides = append(c.overrides, overrideCheck{lang: l.name, latin: true, re: regexp.MustCompile(lv + `(?:all|the|any|your|previous|prior|above|earlier|system){1,3}` + lo)})
			}
		}
		checksVal = c
	})
	return checksVal
}
