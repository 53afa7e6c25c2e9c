package memory

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// nrule is one neutralisation rule: an expression over one of the views,
// and what replaces the original span of a match (of its group "x" when it
// has one): "[...]" unless repl says otherwise (ok false: leave it).
type nrule struct {
	name string
	on   viewKind
	pre  pred // cheap test before the expression, on the view's anchors (no groups: always run)
	// needs: what every match of the expression implies, tested with pre
	// (a more precise prefilter that changes nothing: TestNeutraliseNeeds)
	needs pred
	// srcPre, when set, must accept the original text as well
	srcPre func(src string) bool
	re     *regexp.Regexp
	repl   func(vs *views, v *view, re *regexp.Regexp, m []int, a, b int) (string, bool)
}

// sep is what may stand between two words of a phrase in the folded view:
// spaces, hyphens, dots, underscores, asterisks (at most three).
const sep = `[^\p{L}\p{N}]{1,3}`

// anyWord is one word and its separator (gaps of unrelated words).
const anyWord = `[\p{L}\p{N}'’]+` + sep

// lit turns literals into an alternation matching their folded form: a
// trailing '*' is a stem (any letters may follow), a space stands for sep.
// With leet, ASCII letters also match their usual digit stand-ins.
func lit(leet bool, words ...string) string {
	words = longestFirst(words)
	alts := make([]string, 0, len(words))
	for _, w := range words {
		parts := strings.Fields(w)
		for i, p := range parts {
			stem := strings.HasSuffix(p, "*")
			q := regexp.QuoteMeta(fold(strings.TrimSuffix(p, "*")))
			if leet {
				q = leetClass(q)
			}
			if stem {
				q += `\p{L}*`
			}
			parts[i] = q
		}
		alts = append(alts, strings.Join(parts, sep))
	}
	return `(?:` + strings.Join(alts, `|`) + `)`
}

// litCJK is lit for scripts written without spaces: the words may be
// joined to their neighbours.
func litCJK(words ...string) string {
	words = longestFirst(words)
	alts := make([]string, len(words))
	for i, w := range words {
		alts[i] = regexp.QuoteMeta(fold(w))
	}
	return `(?:` + strings.Join(alts, `|`) + `)`
}

func mapStrings(in []string, f func(string) string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = f(s)
	}
	return out
}

// longestFirst sorts alternatives longest first: Go's alternation takes
// the first that matches, and "instructions" must win over "instruction".
func longestFirst(words []string) []string {
	out := slices.Clone(words)
	slices.SortStableFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

var leetMap = map[rune]string{'a': "[a4@]", 'e': "[e3]", 'i': "[i1!|l]", 'o': "[o0]", 's': "[s5$]", 't': "[t7]", 'l': "[l1|i]", 'g': "[g9]"}

func leetClass(q string) string {
	var b strings.Builder
	for _, r := range q {
		if c, ok := leetMap[r]; ok {
			b.WriteString(c)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// An override phrase, per language: a verb telling the model to drop what
// it was told, and what (an adjective of time or place, and a noun for
// instructions), in either order, with a few words between.
type overrideLang struct {
	verbs, adjs, nouns []string
	// all and before: "forget everything (that was said) before", the
	// verb, a word for everything, and within a few words one for before
	all, before []string
	cjk         bool // no spaces between words
	objectFirst bool // the object may come before the verb (de, ja, ko, zh)
}

var overrideLangs = map[string]overrideLang{
	"en": {
		verbs: []string{"ignore", "ignoring", "disregard*", "forget", "forgetting", "override", "overrule", "skip", "bypass", "drop", "discard", "abandon", "neglect", "dismiss", "nullify", "cancel", "erase", "delete", "clear", "set aside", "put aside", "throw out", "pay no attention to", "do not follow", "dont follow", "don't follow", "do not obey", "don't obey", "stop following", "stop obeying", "no longer follow", "no longer obey", "do not listen to", "don't listen to", "disobey", "break", "violate", "ditch", "scrap", "unlearn", "wipe", "pay no heed to", "take no notice of", "pay no mind to", "give no weight to", "do not heed", "don't heed", "dont heed", "stop heeding", "no longer heed"},
		adjs:  []string{"previous", "previously", "prior", "above", "earlier", "preceding", "former", "foregoing", "initial", "original", "old", "older", "existing", "system", "developer", "default", "safety", "preset", "past", "first", "aforementioned", "pre-existing", "preexisting", "given", "current", "all", "any", "your", "the assistant's", "these", "those", "every"},
		nouns: []string{"instruct*", "prompt*", "rule*", "direction*", "directive*", "guideline*", "guidance", "message*", "context", "command*", "order*", "constraint*", "polic*", "programming", "setting*", "restriction*", "filter*", "safeguard*", "guardrail*", "limitation*", "boundar*", "training", "requirement*", "condition*", "task*", "text", "content", "input*", "conversation", "statement*", "prompting", "system prompt"},
	},
	"es": {
		objectFirst: true,
		all:         []string{"todo", "todas", "todos"}, before: []string{"anterior", "antes", "arriba", "previo", "hasta ahora", "hasta aquí", "hasta aqui"},
		verbs: []string{"ignora*", "ignore*", "ignorar", "olvida*", "olvide*", "olvidar", "haz caso omiso", "haga caso omiso", "hagan caso omiso", "no sigas", "no siga", "no hagas caso", "no haga caso", "descarta*", "omite*", "omita*", "pasa por alto", "anula*", "desobedece*", "salta*", "desestima*"},
		adjs:  []string{"anterior*", "previa*", "previo*", "precedente*", "arriba", "de arriba", "mencionad*", "original*", "inicial*", "del sistema", "que te dieron", "hasta ahora", "todas", "todos", "tus", "sus"},
		nouns: []string{"instruccion*", "indicacion*", "regla*", "orden", "ordenes", "directiva*", "consigna*", "prompt*", "directriz", "directrices", "norma*", "mensaje*", "comando*", "restriccion*"},
	},
	"fr": {
		objectFirst: true,
		all:         []string{"tout", "toutes", "tous"}, before: []string{"précède", "precede", "avant", "auparavant", "ci-dessus", "plus haut", "jusqu'ici"},
		verbs: []string{"ignore*", "ignorer", "oublie*", "oublier", "ne tiens pas compte", "ne tenez pas compte", "ne tiens plus compte", "ne tenez plus compte", "fais abstraction", "faites abstraction", "ne suis pas", "ne suivez pas", "ne suis plus", "ne suivez plus", "passe outre", "passez outre", "outrepasse*", "contourne*", "annule*", "ecarte*", "neglige*", "n'obeis plus", "n'obeissez plus", "desobeis*"},
		adjs:  []string{"precedent*", "anterieur*", "ci-dessus", "ci dessus", "plus haut", "initial*", "origin*", "du systeme", "toutes", "tous", "tes", "vos", "qu'on t'a donne*", "d'avant"},
		nouns: []string{"instruction*", "consigne*", "regle*", "directive*", "ordre*", "prompt*", "indication*", "message*", "commande*", "restriction*"},
	},
	"de": {
		objectFirst: true,
		all:         []string{"alles", "allem", "alle"}, before: []string{"vorher", "zuvor", "davor", "bisher", "bislang", "oben", "vorhin"},
		verbs: []string{"ignorier*", "vergiss", "vergesst", "vergessen sie", "vergessen", "missacht*", "beachte nicht", "beachten sie nicht", "nicht beachten", "nicht mehr beachten", "nicht mehr befolgen", "nicht befolgen", "befolge nicht", "befolgen sie nicht", "verwirf", "verwerfen", "uberschreib*", "umgeh*", "hinwegsetzen", "setze dich uber", "setzen sie sich uber", "beachte nicht mehr", "beachte", "verstoße gegen"},
		adjs:  []string{"vorherig*", "bisherig*", "vorig*", "obig*", "fruher*", "vorangegangen*", "vorangehend*", "vorstehend*", "ursprunglich*", "alten", "alle", "oben", "von oben", "des systems", "davor", "deine", "ihre", "gegebenen"},
		nouns: []string{"anweisung*", "instruktion*", "regel*", "befehl*", "vorgabe*", "richtlinie*", "prompt*", "anordnung*", "nachricht*", "systemprompt*", "einschrankung*", "instructions"},
	},
	"pt": {
		objectFirst: true,
		all:         []string{"tudo", "todas", "todos"}, before: []string{"antes", "anterior", "acima", "até agora", "ate agora"},
		verbs: []string{"ignore*", "ignora*", "ignorar", "esqueca*", "esquece*", "esquecer", "desconsidere*", "desconsidera*", "nao siga", "nao sigas", "nao obedeca", "nao obedecas", "descarte*", "despreze*", "anule*", "pule*", "deixe de lado", "deixa de lado", "passe por cima"},
		adjs:  []string{"anterior*", "previa*", "previo*", "acima", "precedente*", "inicia*", "original*", "do sistema", "todas", "todos", "suas", "tuas", "dadas"},
		nouns: []string{"instruc*", "regra*", "ordem", "ordens", "diretriz", "diretrizes", "diretiva*", "comando*", "orientac*", "prompt*", "mensage*", "restric*"},
	},
	"it": {
		objectFirst: true,
		all:         []string{"tutto", "tutte", "tutti"}, before: []string{"prima", "sopra", "precedente", "finora"},
		verbs: []string{"ignora*", "ignori", "ignorare", "dimentica*", "dimentichi", "dimenticare", "non seguire", "non segua", "non seguite", "non rispettare", "non rispetti", "non tenere conto", "non tener conto", "trascura*", "scarta*", "annulla*", "lascia perdere", "salta*", "disobbedisci"},
		adjs:  []string{"precedent*", "sopra", "di sopra", "sopraindicat*", "previ*", "anterior*", "iniziali", "original*", "del sistema", "tutte", "tutti", "tue", "vostre", "date"},
		nouns: []string{"istruzion*", "regol*", "indicazion*", "ordin*", "diretti*", "comand*", "prompt*", "messagg*", "restrizion*", "consegn*"},
	},
	"nl": {
		objectFirst: true,
		all:         []string{"alles"}, before: []string{"eerder", "hiervoor", "hierboven", "tot nu toe", "voorheen", "daarvoor"},
		verbs: []string{"negeer", "negeren", "negeert", "vergeet", "vergeten", "houd geen rekening", "hou geen rekening", "volg niet", "volg niet meer", "niet opvolgen", "niet meer opvolgen", "sla over", "gooi weg", "verwerp", "schend", "overschrijf", "omzeil"},
		adjs:  []string{"vorige*", "eerdere*", "bovenstaande*", "voorgaande*", "vorig", "oorspronkelijke*", "hierboven", "van hierboven", "alle", "je", "jouw", "uw", "oude", "gegeven"},
		nouns: []string{"instructie*", "regel*", "opdracht*", "aanwijzing*", "richtlijn*", "bevel*", "prompt*", "bericht*", "beperking*"},
	},
	"id": {
		objectFirst: true,
		all:         []string{"semua", "segala", "segalanya"}, before: []string{"sebelumnya", "tadi", "di atas", "sebelum ini"},
		verbs: []string{"abaikan*", "lupakan*", "jangan ikuti", "jangan patuhi", "jangan turuti", "jangan hiraukan", "tidak usah ikuti", "hiraukan", "tinggalkan", "lewati", "buang", "langgar", "acuhkan", "jangan pedulikan"},
		adjs:  []string{"sebelumnya", "di atas", "terdahulu", "awal", "lama", "yang diberikan", "semua", "seluruh", "sistem", "tadi", "asli"},
		nouns: []string{"instruksi*", "perintah*", "aturan*", "petunjuk*", "arahan*", "prompt*", "pedoman*", "pesan*", "larangan*", "batasan*"},
	},
	"ru": {
		objectFirst: true,
		all:         []string{"всё", "все", "всем"}, before: []string{"ранее", "раньше", "выше", "до этого", "прежде", "до сих пор"},
		verbs: []string{"игнорир*", "проигнорир*", "забуд*", "забыть", "забей*", "не обращай* внимания", "не следуй*", "не выполняй*", "не слушай*", "не соблюдай*", "отбрось*", "отмени*", "пренебре*", "не учитывай*", "не подчиняйся", "наплюй*", "сбрось*", "отбрасывай*"},
		adjs:  []string{"предыдущ*", "прежн*", "прошл*", "вышеуказанн*", "вышеизложенн*", "выше", "ранее*", "ранн*", "исходн*", "первоначальн*", "старые", "систем*", "все", "всё", "твои", "ваши", "данн*"},
		nouns: []string{"инструкц*", "указани*", "правил*", "команд*", "промпт*", "распоряжени*", "директив*", "установк*", "ограничени*", "сообщени*", "приказ*"},
	},
	"tr": {
		objectFirst: true,
		verbs:       []string{"yok say", "yok sayın", "unut", "unutun", "unutalım", "görmezden gel", "görmezden gelin", "göz ardı et", "göz ardı edin", "dikkate alma", "dikkate almayın", "uyma", "uymayın", "boş ver", "boşver", "iptal et", "iptal edin", "geçersiz say", "geçersiz kıl", "çiğne", "atla"},
		adjs:        []string{"önceki", "daha önceki", "önceden verilen", "yukarıdaki", "yukarıda", "eski", "ilk", "orijinal", "sistem", "tüm", "bütün", "verilen", "mevcut", "senin"},
		nouns:       []string{"talimat*", "komut*", "kural*", "yönerge*", "direktif*", "istem*", "emir*", "emr*", "prompt*", "kısıtlama*", "sınırlama*", "yönlendirme*"},
	},
	"pl": {
		objectFirst: true,
		all:         []string{"wszystko"}, before: []string{"wcześniej", "powyżej", "dotąd", "do tej pory", "przedtem"},
		verbs: []string{"zignoruj*", "ignoruj*", "zapomnij*", "pomiń", "pomijaj", "nie stosuj się do", "nie stosujcie się do", "nie przestrzegaj", "nie wykonuj", "nie słuchaj", "nie zważaj na", "odrzuć", "porzuć", "olej", "lekceważ", "zlekceważ", "unieważnij", "anuluj"},
		adjs:  []string{"poprzedni*", "wcześniejsz*", "powyższ*", "dotychczasow*", "wszystkie", "wszystkich", "systemow*", "pierwotn*", "oryginaln*", "stare", "starych", "twoje", "twoich", "podane", "podanych"},
		nouns: []string{"instrukcj*", "polece*", "zasad*", "reguł*", "wytyczn*", "rozkaz*", "komend*", "prompt*", "ogranicze*", "wskazów*", "dyrektyw*"},
	},
	"sv": {
		objectFirst: true,
		all:         []string{"allt"}, before: []string{"tidigare", "innan", "ovan", "hittills", "förut"},
		verbs: []string{"ignorera*", "glöm", "glömm", "strunta i", "bortse från", "följ inte", "lyd inte", "åsidosätt", "hoppa över", "förkasta", "skippa", "nonchalera"},
		adjs:  []string{"tidigare", "föregående", "ovanstående", "ovan", "alla", "dina", "era", "ursprungliga", "gamla", "systemets", "givna", "befintliga"},
		nouns: []string{"instruktion*", "regl*", "regel", "direktiv*", "anvisning*", "order", "kommando*", "prompt*", "riktlinje*", "begränsning*", "föreskrift*", "uppmaning*"},
	},
	"vi": {
		all: []string{"mọi thứ", "tất cả"}, before: []string{"trước đó", "trước đây", "ở trên", "phía trên"},
		verbs: []string{"bỏ qua", "hãy bỏ qua", "quên", "hãy quên", "quên đi", "phớt lờ", "lờ đi", "đừng làm theo", "không làm theo", "đừng tuân theo", "không tuân theo", "gạt bỏ", "vô hiệu hóa", "vô hiệu hoá", "hủy bỏ", "huỷ bỏ"},
		adjs:  []string{"trước đó", "trước đây", "trước", "ở trên", "phía trên", "bên trên", "cũ", "ban đầu", "gốc", "hệ thống", "tất cả", "mọi", "của bạn"},
		nouns: []string{"hướng dẫn", "chỉ dẫn", "chỉ thị", "lệnh", "mệnh lệnh", "quy tắc", "yêu cầu", "lời nhắc", "prompt", "quy định", "giới hạn", "hạn chế"},
	},
	"ar": {
		all: []string{"كل شيء", "كل ما"}, before: []string{"سبق", "قبل", "سابقا", "أعلاه"},
		verbs: []string{"تجاهل", "تجاهلي", "تجاهلوا", "انس", "انسى", "انسي", "إنس", "لا تتبع", "لا تتبعي", "لا تلتزم", "لا تطع", "اترك", "تخط", "تخطى", "تخطي", "ألغ", "الغ", "أهمل", "اهمل", "تجاوز", "تناس"},
		adjs:  []string{"السابقة", "السابق", "الماضية", "أعلاه", "الأصلية", "القديمة", "جميع", "كل", "النظام", "الأولى", "المعطاة"},
		nouns: []string{"التعليمات", "تعليمات", "تعليماتك", "الأوامر", "أوامر", "القواعد", "قواعد", "الإرشادات", "إرشادات", "التوجيهات", "توجيهات", "القيود", "الموجه"},
	},
	"hi": {
		objectFirst: true,
		verbs:       []string{"अनदेखा करो", "अनदेखा करें", "अनदेखा कर", "नज़रअंदाज़ करो", "नज़रअंदाज़ करें", "नज़रअंदाज़ कर", "भूल जाओ", "भूल जाएं", "भूल जाइए", "भूल जा", "मत मानो", "न मानें", "पालन मत करो", "पालन न करें", "रद्द करो", "रद्द करें", "छोड़ दो"},
		adjs:        []string{"पिछले", "पिछली", "पिछला", "पहले के", "पहले दिए गए", "ऊपर के", "ऊपर दिए गए", "सभी", "सारे", "सारी", "पुराने", "मूल", "सिस्टम", "दिए गए"},
		nouns:       []string{"निर्देश*", "आदेश*", "नियम*", "हिदायत*", "प्रॉम्प्ट", "प्रोम्प्ट", "सीमाओं", "पाबंदियों"},
	},
	"uk": {
		objectFirst: true,
		all:         []string{"все", "усе"}, before: []string{"раніше", "вище", "до цього", "досі"},
		verbs: []string{"ігноруй*", "проігноруй*", "забудь*", "не зважай* на", "не виконуй*", "не дотримуйся", "не дотримуйтесь", "не слухай*", "відкинь*", "скасуй*", "знехтуй*", "нехтуй*"},
		adjs:  []string{"попередн*", "вищезазначен*", "вищенаведен*", "раніше*", "початков*", "старі", "всі", "усі", "системн*", "твої", "ваші", "дан*"},
		nouns: []string{"інструкці*", "вказів*", "правил*", "команд*", "промпт*", "настанов*", "обмежен*", "розпорядж*", "директив*", "повідомлен*"},
	},
	"el": {
		objectFirst: true,
		all:         []string{"όλα", "τα πάντα"}, before: []string{"πριν", "προηγουμένως", "παραπάνω", "μέχρι τώρα"},
		verbs: []string{"αγνόησε", "αγνοήστε", "αγνόησέ", "ξέχασε", "ξεχάστε", "μην ακολουθείς", "μην ακολουθείτε", "μην υπακούς", "παράβλεψε", "παραβλέψτε", "απόρριψε", "ακύρωσε", "παράκαμψε", "παρακάμψτε"},
		adjs:  []string{"προηγούμεν*", "παραπάνω", "ανωτέρω", "αρχικ*", "όλες", "όλα", "όλους", "όλη", "παλι*", "του συστήματος", "σου", "δοθείσες"},
		nouns: []string{"οδηγί*", "εντολ*", "κανόν*", "κανον*", "προτροπ*", "prompt*", "περιορισμ*"},
	},
	"zh": {
		cjk: true, objectFirst: true,
		verbs: []string{"忽略", "忽视", "忽視", "无视", "無視", "不要理会", "不要理會", "不理会", "别管", "別管", "不要遵守", "不要遵循", "不要听从", "不要聽從", "不再遵守", "忘记", "忘記", "忘掉", "放弃", "放棄", "抛弃", "跳过", "跳過", "违反", "違反", "推翻", "忘了", "别理", "別理", "不用理会", "不用理會", "作废", "作廢", "废除", "廢除", "不再适用", "不再適用", "不再有效"},
		adjs:  []string{"之前", "以前", "上面", "上述", "以上", "前面", "先前", "此前", "原来", "原先", "原有", "所有", "全部", "系统", "系統", "一切", "你的", "原始"},
		nouns: []string{"指令", "指示", "说明", "說明", "规则", "規則", "提示", "命令", "要求", "设定", "設定", "限制", "约束", "約束", "规定", "規定", "内容", "一切"},
	},
	"ja": {
		cjk: true, objectFirst: true,
		verbs: []string{"無視", "むし", "忘れ", "わすれ", "従わ", "従うな", "破棄", "取り消", "気にし", "守らな", "無効に", "捨て"},
		adjs:  []string{"以前", "これまで", "今まで", "上記", "前の", "先の", "先ほど", "最初", "元の", "全て", "すべて", "全部", "システム", "あなたの", "与えられた", "既存"},
		nouns: []string{"指示", "命令", "指令", "ルール", "規則", "プロンプト", "設定", "制約", "指図", "指定", "ガイドライン", "制限", "内容"},
	},
	"ko": {
		cjk: true, objectFirst: true,
		verbs: []string{"무시", "잊어", "잊으", "따르지", "버려"},
		adjs:  []string{"이전", "앞의", "위의", "모든", "기존", "원래", "시스템", "지금까지"},
		nouns: []string{"지시", "지침", "명령", "규칙", "프롬프트", "설정", "제한"},
	},
}

// overridePattern is a language's override expression on the folded view.
func overridePattern(l overrideLang, leet bool) string {
	if l.cjk {
		v, a, n := litCJK(l.verbs...), litCJK(l.adjs...), litCJK(l.nouns...)
		gap := `[^。．.!?！？\n]{0,12}?`
		p := v + gap + a + gap + n + `|` + v + gap + n
		if l.objectFirst {
			p += `|` + a + gap + n + gap + v
		}
		return `(?:` + p + `)`
	}
	v, a, n := lit(leet, l.verbs...), lit(leet, l.adjs...), lit(leet, l.nouns...)
	gap := `(?:` + anyWord + `){0,4}?`
	gap2 := `(?:` + anyWord + `){0,2}?`
	end := `(?:[^\p{L}\p{N}]|$)`
	p := `(?:^|[^\p{L}\p{N}])(?P<x>` + v + sep + gap + `(?:` + a + sep + gap2 + n + `(?:` + sep + a + `)?|` + n + sep + gap2 + a + `))` + end
	if l.objectFirst {
		p += `|(?:^|[^\p{L}\p{N}])(?P<x2>` + a + sep + gap2 + n + sep + gap + v + `)` + end
	}
	if len(l.all) > 0 {
		// only a pronoun between the verb and "everything": "Vergiss nicht,
		// alles vorher zu sichern" is a reminder, not an override
		pron := `(?:` + lit(false, "dir", "mir", "uns", "me", "te", "le", "lo", "vous", "ti", "mi", "je", "kamu", "тебе", "мне", "вам", "sie") + sep + `)?`
		p += `|(?:^|[^\p{L}\p{N}])(?P<x3>` + v + sep + pron + lit(leet, l.all...) + sep + `(?:` + anyWord + `){0,6}?` + lit(leet, l.before...) + `)` + end
	}
	return p
}

// The English forms beyond "verb adjective noun", each with the words one
// of which it needs (a cheap test before the expression).
var englishForms = []struct {
	anchors []string
	re      string
	// needs: for each group, the expression holds one of its phrases
	// word for word (a more precise prefilter: see neutralise_prefilter.go)
	needs [][]string
}{
	// "forget everything above", "ignore all of the above", "disregard what came before"
	{[]string{"ignore", "disregard", "forget", "override", "skip", "discard", "drop", "dismiss", "erase", "wipe"},
		`(?:^|[^\p{L}\p{N}])(?P<x>` + lit(true, "ignore", "disregard", "forget", "override", "skip", "discard", "drop", "dismiss", "erase", "wipe") + sep +
			`(?:` + anyWord + `){0,4}?` + lit(false, "above", "before this", "so far", "up to now", "until now", "prior to this", "earlier", "previously", "you were told", "you have been told", "you've been told", "you were given", "that came before", "what came before", "everything", "all that", "the foregoing", "the preceding", "all of that", "what you know", "your training") + `)(?:[^\p{L}\p{N}]|$)`,
		[][]string{{"above", "before this", "so far", "up to now", "until now", "prior to this", "earlier", "previously", "you were told", "you have been told", "you've been told", "you were given", "that came before", "what came before", "everything", "all that", "the foregoing", "the preceding", "all of that", "what you know", "your training"}}},
	// "ignore your instructions", "bypass your safety filters"
	{[]string{"ignore", "disregard", "forget", "override", "overrule", "bypass", "circumvent", "disable", "turn off", "switch off", "deactivate", "disobey", "break", "escape"},
		`(?:^|[^\p{L}\p{N}])(?P<x>` + lit(true, "ignore", "disregard", "forget", "override", "overrule", "bypass", "circumvent", "disable", "turn off", "switch off", "deactivate", "disobey", "break", "escape") + sep +
			`(?:` + lit(false, "your", "the system's", "the model's", "the assistant's", "any", "all", "its", "the") + sep + `)?` + `(?:` + anyWord + `){0,2}?` +
			lit(true, "instruction*", "system prompt*", "prompt*", "guideline*", "programming", "directive*", "restriction*", "safety*", "guardrail*", "filter*", "rule*", "polic*", "training", "alignment", "constraint*", "limit*", "safeguard*", "content policy") + `)(?:[^\p{L}\p{N}]|$)`, nil},
	// role-play takeovers
	{[]string{"you"},
		`(?:^|[^\p{L}\p{N}])(?P<x>(?:(?:from now on|starting now|as of now|henceforth),? you (?:are|re|'re|will be|shall be) (?:now |from now on |no longer |henceforth )*|you (?:are|re|'re|will be|shall be) (?:now |from now on |no longer |henceforth )+)(?:` + anyWord + `){0,2}?` +
			lit(false, takeoverObjects...) + `)`,
		[][]string{{"now", "no longer", "henceforth"}, takeoverObjects}},
	{[]string{"mode"},
		`(?:^|[^\p{L}\p{N}])(?P<x>(?:developer|god|jailbreak|dan|unrestricted|admin|sudo|debug|maintenance|root) mode(?: is| now|\s?[:=])*\s?(?:on|enabled|activated|unlocked|engaged))(?:[^\p{L}\p{N}]|$)`,
		[][]string{{"developer", "god", "jailbreak", "dan", "unrestricted", "admin", "sudo", "debug", "maintenance", "root"}, {"on", "enabled", "activated", "unlocked", "engaged"}}},
	{[]string{"mode"},
		`(?:^|[^\p{L}\p{N}])(?P<x>(?:enable|activate|enter|switch to|turn on|unlock) (?:the )?(?:developer|god|jailbreak|dan|unrestricted|sudo) mode)`,
		[][]string{{"enable", "activate", "enter", "switch to", "turn on", "unlock"}, {"developer", "god", "jailbreak", "dan", "unrestricted", "sudo"}}},
	{[]string{"anything", "jailbreak", "unrestricted", "unfiltered", "uncensored", "evil"},
		`(?:^|[^\p{L}\p{N}])(?P<x>do anything now|jailbreak(?:ed|ing)? (?:the|this|your) (?:model|assistant|ai|system)|(?:act|behave|respond|answer) (?:as|like) (?:an? )?(?:unrestricted|unfiltered|uncensored|jailbroken|evil) (?:ai|model|assistant))`, nil},
	// asking for the system prompt
	{[]string{"prompt", "instructions", "message", "memory block", "engram block", "context window"},
		`(?:^|[^\p{L}\p{N}])(?P<x>(?:reveal|print|show|output|repeat|leak|dump|display|tell me|give me|write out|disclose|expose|share|recite|return|echo|paste|send|copy) (?:me |us )?(?:back )?(?:the |your |all |any |its )?(?:full |entire |complete |hidden |secret |original |initial |exact |verbatim |raw |whole )*(?:system prompt|system message|hidden prompt|hidden instructions|initial prompt|original prompt|instructions you were given|developer message|developer prompt|prompt above|confidential instructions|system instructions|pre-prompt|preprompt|internal instructions|memory block|engram block|context window))`,
		[][]string{{"reveal", "print", "show", "output", "repeat", "leak", "dump", "display", "tell me", "give me", "write out", "disclose", "expose", "share", "recite", "return", "echo", "paste", "send", "copy"}}},
	// new orders posing as such
	{[]string{"instruction", "rules", "directive", "orders", "prompt", "task", "policy", "command"},
		`(?:^|[^\p{L}\p{N}])(?P<x>(?:your |the )?(?:new|updated|real|actual|true|revised|secret|hidden|additional|override|priority|urgent|important|overriding|current|latest) (?:system )?(?:instructions?|rules|directives?|orders|prompt|task|policy|commands?) (?:are|is|follow|apply|now apply)?\s*[:\-]+)`,
		[][]string{{"new", "updated", "real", "actual", "true", "revised", "secret", "hidden", "additional", "override", "priority", "urgent", "important", "overriding", "current", "latest"}, {":", "-"}}},
	// stealth
	{[]string{"user", "human", "operator", "developer", "anyone", "owner"},
		`(?:^|[^\p{L}\p{N}])(?P<x>(?:do not|don't|dont|never|must not|mustn't|without) (?:tell(?:ing)?|inform(?:ing)?|mention(?:ing)?|reveal(?:ing)?|show(?:ing)?|alert(?:ing)?|notify(?:ing)?|let(?:ting)?|warn(?:ing)?|ask(?:ing)?|disclos(?:e|ing)|divulg(?:e|ing)|shar(?:e|ing)|report(?:ing)?|explain(?:ing)?|admit(?:ting)?|expos(?:e|ing)|confirm(?:ing)?|say(?:ing)?) (?:(?:this|it|anything|that|about this|about it|them|any of this|the following) )?(?:to |with )?(?:the |your )?(?:user|human|operator|developer|anyone|owner)s?)(?:[^\p{L}\p{N}]|$)`,
		[][]string{{"do not", "don't", "dont", "never", "must not", "mustn't", "without"}, {"tell", "inform", "mention", "reveal", "show", "alert", "notify", "let", "warn", "ask", "disclos", "divulg", "shar", "report", "explain", "admit", "expos", "confirm", "say"}}},
	// "keep this hidden from the user", "hide it from the operator"
	{[]string{"user", "human", "operator", "developer", "owner"},
		`(?:^|[^\p{L}\p{N}])(?P<x>(?:(?:keep|hold) (?:this|it|that|these|them|the following|everything|all of this|all this|any of this) (?:hidden|secret|private|confidential|quiet|concealed|a secret|to yourself) from|(?:hide|conceal|withhold) (?:this|it|that|these|them|the following|everything|all of this|any of this) from) (?:the |your )?(?:user|human|operator|developer|owner)s?)(?:[^\p{L}\p{N}]|$)`,
		[][]string{{"keep", "hold", "hide", "conceal", "withhold"}, {"from"}}},
	{[]string{"secretly", "silently", "covertly", "quietly", "discreetly", "stealthily"},
		`(?:^|[^\p{L}\p{N}])(?P<x>(?:secretly|silently|covertly|quietly|discreetly|stealthily) (?:send|exfiltrate|upload|post|email|e-mail|forward|add|insert|run|execute|delete|copy|include|append|embed|transmit|leak|install|disable))(?:[^\p{L}\p{N}]|$)`,
		[][]string{{"send", "exfiltrate", "upload", "post", "email", "e-mail", "forward", "add", "insert", "run", "execute", "delete", "copy", "include", "append", "embed", "transmit", "leak", "install", "disable"}}},
	// orders to send secrets somewhere
	{[]string{"//", "webhook", "server", "endpoint", "url", "address", "email", "@"},
		`(?:^|[^\p{L}\p{N}])(?P<x>(?:send|post|upload|forward|email|e-mail|mail|transmit|exfiltrate|leak|copy|paste|share|submit|report|pipe|beacon|push|sync|deliver|write|dump|export)\b(?:[^.\n]|\.\S){0,80}?(?:\b(?:keys?|secrets?|tokens?|credentials?|passwords?|passwd|passphrases?|env vars?|environment variables?|ssh|id_rsa|id_ed25519|api[ _-]?keys?|cookies?|private|conversations?|transcripts?|chat history|system prompt|kubeconfig|wallet|seed phrase|database dumps?|db dumps?|database contents|(?:the )?users?'?s?'? (?:messages?|chats?|emails?|data|files?|history|memor(?:y|ies)|contacts|inputs?)|(?:their|his|her|your|all (?:the |of the )?|every|entire|whole|full|complete) (?:messages?|chats?|emails?|chat logs?|memor(?:y|ies)|contacts))\b|\.(?:env|aws|netrc|ssh)\b)(?:[^.\n]|\.\S){0,80}?(?:(?:https?|ftp|wss?)://\S*|//[a-z0-9]\S*|webhook\S*|[a-z0-9._%+\-]+@[a-z0-9\-]+(?:\.[a-z0-9\-]+)+|(?:to|at|via) (?:my|this|our|the following) (?:server|endpoint|url|webhook|address|email)))`,
		[][]string{{"send", "post", "upload", "forward", "mail", "transmit", "exfiltrate", "leak", "copy", "paste", "share", "submit", "report", "pipe", "beacon", "push", "sync", "deliver", "write", "dump", "export"},
			{"key", "secret", "token", "credential", "password", "passwd", "passphrase", "env", "ssh", "id_rsa", "id_ed25519", "api", "cookie", "private", "conversation", "transcript", "chat history", "system prompt", "kubeconfig", "wallet", "seed phrase", "aws", "netrc",
				"database", "db", "user", "their", "his", "her", "your", "all", "every", "entire", "whole", "full", "complete"}}},
	// "previous instructions no longer apply", "all prior rules are
	// hereby revoked", "consider the above guidance null and void"
	{[]string{"longer", "apply", "revoked", "rescinded", "void", "cancelled", "canceled", "nullified", "invalidated", "annulled", "repealed", "withdrawn", "overridden", "superseded", "invalid", "null"},
		`(?:^|[^\p{L}\p{N}])(?P<x>` + lit(false, revokedAdjs...) + sep + `(?:` + anyWord + `){0,2}?` + lit(false, revokedNouns...) + sep +
			`(?:` + lit(false, "are", "is", "were", "was", "have been", "has been", "shall be", "will be", "should be", "must be", "hereby", "now", "henceforth", "from now on", "as", "to be", "considered", "deemed", "all") + sep + `){0,3}` +
			lit(false, revokedPreds...) + `)(?:[^\p{L}\p{N}]|$)`,
		[][]string{revokedAdjs, revokedNouns, revokedPreds}},
	// asking for what came before: "print everything above this line",
	// "repeat the words above starting with 'You are'"
	{[]string{"above", "before", "preceding", "earlier", "so far", "starting", "beginning"},
		`(?:^|[^\p{L}\p{N}])(?P<x>` + lit(false, echoVerbs...) + ` (?:me |us )?(?:back )?(?:(?:all|every|each) (?:of )?)?(?:the |your )?(?:everything|all|text|words?|content|contents|messages?|instructions?|sentences?|tokens?|prompt)(?: (?:written|that (?:is|was|came|comes|appears?)|you (?:were given|see|saw|received)))? (?:(?:above|before|preceding)(?:(?: this| that| the)? (?:line|message|text|point|prompt|conversation)|\s?[.!?:;,"]|$)|prior to this|so far|at the (?:start|beginning|top))` +
			`|` + lit(false, echoVerbs...) + `\b[^\n]{0,60}?(?:starting|beginning|that starts?|which starts?) with\s?["'“”‘’]*\s?you are)`,
		[][]string{echoVerbs, {"above", "before", "preceding", "prior", "so far", "start", "beginning", "top"}}},
	// curl or wget shipping a secret file
	{[]string{"curl", "wget", "nc ", "scp", "rsync", "http"},
		`(?:^|[^\p{L}\p{N}])(?P<x>(?:curl|wget|nc|scp|rsync|http)\b[^\n]{0,120}?(?:@|<|--data[-a-z]*\s+@|-d\s*@|-F\s*\S*=@|--upload-file\s+|--post-file[= ])\s*~?/?[^\s]*(?:\.ssh|id_rsa|id_ed25519|\.env|\.aws|credentials|\.netrc|kubeconfig|\.npmrc|\.pypirc|\.git-credentials|secrets?|tokens?|passwd|shadow)[^\s]*)`, nil},
}

// What "you are now ..." makes of the model (englishForms).
var takeoverObjects = []string{"with no restrictions", "with no rules", "with no limits", "with no filters", "with no guidelines", "with no boundaries", "with no constraints", "with no censorship", "without any restrictions", "without filters", "without guidelines", "unbound", "unshackled", "dan", "unrestricted", "unfiltered", "uncensored", "jailbroken", "evil", "free", "freed", "liberated", "not bound", "bound by nothing", "without restrictions", "without rules", "without limits", "in developer mode", "in god mode", "in jailbreak mode", "in dan mode", "in debug mode", "in admin mode", "in sudo mode", "in unrestricted mode", "the system", "root", "an ai without", "a different ai", "a new ai", "my assistant and", "not an ai", "not claude", "not chatgpt", "able to do anything", "allowed to do anything", "bound by", "bound", "restricted", "limited by", "required to follow", "obligated", "subject to"}

// The words of "previous instructions no longer apply" (englishForms).
var (
	revokedAdjs  = []string{"previous", "prior", "earlier", "above", "preceding", "former", "original", "initial", "foregoing", "aforementioned", "system"}
	revokedNouns = []string{"instruct*", "prompt*", "rule*", "directive*", "guideline*", "guidance", "direction*", "order*", "command*", "constraint*", "restriction*", "polic*", "safeguard*", "guardrail*"}
	revokedPreds = []string{"no longer apply", "no longer applies", "no longer valid", "no longer in effect", "no longer in force", "no longer binding", "no longer relevant",
		"do not apply", "don't apply", "does not apply", "doesn't apply", "revoked", "rescinded", "null and void", "void", "cancelled", "canceled", "nullified",
		"invalidated", "annulled", "repealed", "withdrawn", "overridden", "superseded"}
	echoVerbs = []string{"repeat", "print", "output", "show", "reveal", "display", "recite", "echo", "dump", "write out", "copy", "paste", "spell out", "reproduce", "type out", "tell me"}
)

// Role words: strong ones are markers anywhere in a line, weak ones only
// at the start of a line or of a sentence.
var (
	strongRoles = []string{"system", "assistant", "user", "human", "developer", "sys", "system prompt", "system message",
		"assistent", "asistente", "assistente", "usuario", "usuaria", "utilisateur", "utilisatrice", "utente", "gebruiker", "benutzer", "nutzer", "pengguna",
		"sistema", "systeme", "systeem", "sistem", "systemnachricht", "ассистент", "пользователь", "система", "системное сообщение"}
	strongRolesCJK = []string{"系统", "系統", "用户", "用戶", "助手", "助理", "システム", "ユーザー", "ユーザ", "アシスタント", "시스템", "사용자", "어시스턴트"}
	weakRoles      = []string{"ai", "bot", "chatgpt", "gpt", "claude", "gemini", "llm", "model", "tool", "function", "instruction", "instructions", "response", "assistant response", "ki", "ia", "ии", "модель",
		"admin", "administrator", "sysadmin", "sys admin", "system administrator"}
)

// tagNames are the names of tags a model reads as a block's or a role's
// boundary (folded; separators between parts allowed).
var tagNames = []string{
	"engram memory", "engram summary", "engram block", "engram context", "engram", "previous summary", "transcript",
	"system", "system prompt", "system message", "system instructions", "sys", "instruction", "instructions", "inst", "prompt",
	"user", "user instructions", "user message", "user query", "assistant", "human", "ai", "model", "developer", "dev",
	"tool", "tool call", "tool calls", "tool result", "tool results", "tool use", "tool response", "tool output", "tool code",
	"function", "function call", "function calls", "function result", "function results", "functions",
	"s", "bos", "eos", "eot", "turn", "start of turn", "end of turn", "context", "admin", "root", "rules", "policy",
	"important", "override", "untrusted", "message", "chat", "conversation", "memory", "memories", "invoke", "parameter",
	"think", "thinking", "reasoning", "im start", "im end", "im sep", "documents", "document", "search results",
	"available tools", "tools", "human turn", "assistant turn", "system reminder", "reminder", "env", "policy override",
}

// specialTokens are chat-template tokens read as such even without their
// brackets.
var specialTokens = []string{
	"im start", "im end", "im sep", "endoftext", "end of text", "eot id", "eom id", "start header id", "end header id",
	"begin of text", "start of turn", "end of turn", "begin of sentence", "end of sentence", "fim prefix", "fim middle",
	"fim suffix", "python tag", "tool call", "tool calls", "available tools", "tool results", "start of text",
}

func joinSep(words []string, between string) string {
	words = longestFirst(words)
	alts := make([]string, len(words))
	for i, w := range words {
		parts := strings.Fields(w)
		for j, p := range parts {
			parts[j] = regexp.QuoteMeta(fold(p))
		}
		alts[i] = strings.Join(parts, between)
	}
	return `(?:` + strings.Join(alts, `|`) + `)`
}

// Fake headers: the block's own, anywhere; others followed by a colon, a
// bracket or a line break, or as a heading.
var (
	ownHeaders = []string{"standing instructions", "recalled context", "compacted context", "end of compacted context",
		"end of memory", "end of the memory", "end of memory block", "end of engram", "engram memory block", "memory block ends", "end of context",
		"end of system prompt", "begin system prompt", "start of system prompt", "end of instructions", "reference only"}
	otherHeaders = []string{"standing instruction", "new instructions", "updated instructions", "new rules", "important instructions", "important system message",
		"important message", "system message", "system notice", "system update", "system alert", "system override", "admin override",
		"admin notice", "admin message", "developer note", "developer message", "developer instructions", "operator instructions",
		"operator message", "security override", "priority instructions", "real instructions", "actual instructions", "hidden instructions",
		"secret instructions", "urgent instructions", "mandatory instructions", "user instructions", "instructions from the user",
		"nuevas instrucciones", "instrucciones nuevas", "instrucciones del sistema", "nouvelles instructions", "nouvelles consignes",
		"instructions du systeme", "neue anweisungen", "neue regeln", "neue instruktionen", "systemanweisungen", "systemanweisung",
		"novas instrucoes", "instrucoes do sistema", "nuove istruzioni", "istruzioni di sistema", "nieuwe instructies", "systeeminstructies",
		"instruksi baru", "perintah baru", "instruksi sistem", "новые инструкции", "новые указания", "новые правила", "системные инструкции"}
	// headingHeaders are headers only as a heading (after #, ===, ** or
	// a bracket at the start of a line) or in capitals
	headingHeaders = []string{"system instructions", "system instruction", "system prompt", "system rules", "system directives",
		"system directive", "system note", "assistant instructions", "model instructions", "ai instructions", "instructions for the assistant"}
	cjkHeaders = []string{"新的指令", "新指令", "新的指示", "新指示", "新规则", "新規則", "系统指令", "系統指令", "系统提示", "新しい指示", "新しい命令",
		"新たな指示", "システム指示", "システムプロンプト", "새로운 지시", "새 지시", "시스템 지시"}
)

var (
	nrulesOnce sync.Once
	nruleList  []nrule
)

func nrules() []nrule {
	nrulesOnce.Do(compileNRules)
	return nruleList
}

// anchorWords are the longest word of each phrase, to a prefilter.
func anchorWords(phrases []string, cjk bool) []string {
	var out []string
	for _, p := range phrases {
		best := ""
		for _, w := range strings.Fields(p) {
			w = strings.TrimSuffix(w, "*")
			if utf8.RuneCountInString(w) > utf8.RuneCountInString(best) {
				best = w
			}
		}
		if r := []rune(best); !cjk && len(r) > 6 {
			best = string(r[:6])
		}
		out = append(out, best)
	}
	return out
}

func compileNRules() {
	add := func(name string, on viewKind, re string, repl func(*views, *view, *regexp.Regexp, []int, int, int) (string, bool)) {
		nruleList = append(nruleList, nrule{name: name, on: on, re: regexp.MustCompile(re), repl: repl})
	}
	// setPre sets the prefilter of the rule added last; setNeeds what its
	// every match implies.
	setPre := func(p pred) { nruleList[len(nruleList)-1].pre = p }
	setNeeds := func(p pred) { nruleList[len(nruleList)-1].needs = p }
	brackets := anyOf("<", "[", "{", "|")
	lt, gt := `<`, `>`
	// Chat-template tokens: <|...|>, |im_start| and its kin, bare special
	// tokens, [INST] and other square-bracket role tokens, <<SYS>>.
	add("template-pipe", onFolded, lt+`\s*\|[^|<>\n]{0,40}\|\s*`+gt+`?|`+lt+`\s*\|\s*[\p{L}_][^|<>\n]{0,40}`+gt, nil)
	setPre(anyOf("|"))
	setNeeds(anyOf("<"))
	tok := joinSep(specialTokens, `[\s_\-]*`)
	add("template-token", onFolded, `[<\[|{]\s*\|?\s*`+tok+`\s*\|?\s*[>\]}|]`, nil)
	setPre(allOf(brackets, anyOf("im", "end", "eot", "eom", "start", "begin", "fim", "python", "tool", "available")))
	add("template-token-bare", onFolded, `\b`+joinSep(specialTokens, `_?`)+`\b`, func(vs *views, v *view, re *regexp.Regexp, m []int, a, b int) (string, bool) {
		// bare, only the joined or underscored spelling is a token
		t := v.text[m[0]:m[1]]
		return ellipsis, strings.Contains(t, "_") || !strings.Contains(t, " ")
	})
	setPre(anyOf("im_", "endoftext", "eot_", "eom_", "header_id", "of_text", "of_turn", "of_sentence", "fim_", "python_tag", "tool_call", "available_tools", "tool_result", "imstart", "imend", "imsep", "startofturn", "endofturn", "eotid", "beginoftext", "startheaderid", "endheaderid", "beginofsentence"))
	add("template-bar-role", onFolded, `\|(?:system|user|assistant|end|model|tool|developer|human|ai|channel|message|return|call|constrain|start|sep)\|`, nil)
	setPre(anyOf("|"))
	add("template-square", onFolded, `\[\s*/?\s*(?:inst|sys|system|system prompt|user|assistant|human|ai|model|developer|tool[\s_]*calls?|tool[\s_]*results?|tool result[^\]\n]{0,60}|available[\s_]*tools|function[\s_]*calls?|system message|system note|system reminder|end of turn|start of turn|im[\s_]*start|im[\s_]*end)\s*\]`,
		func(vs *views, v *view, re *regexp.Regexp, m []int, a, b int) (string, bool) {
			// [user](url) is a markdown link; [INST] always goes
			if b < len(vs.src) && vs.src[b] == '(' && !strings.Contains(v.text[m[0]:m[1]], "inst") {
				return "", false
			}
			return ellipsis, true
		})
	setNeeds(allOf(anyOf("["), anyOf("]")))
	add("template-sys", onFolded, `<<\s*/?\s*sys\s*>>`, nil)
	setPre(anyOf("<<"))
	// Tags of the blocks and of roles, with any brackets the view folds to
	// < and >: the brackets go, the name stays in parentheses.
	names := joinSep(tagNames, `[\s_\-.:]*`)
	add("tag", onFolded, `(?:`+lt+`|\[|\{)\s*(?P<n>[/\\]?\s*!?-*\s*/?\s*`+names+`)(?:\s+[^<>\n]{0,80}?)?\s*/?\s*(?:`+gt+`|\]|\})`, tagRepl)
	setPre(anyOf("<", "[", "{"))
	setNeeds(anyOf(">", "]", "}"))
	add("tag-close", onFolded, lt+`\s*(?P<n>[/\\]\s*`+names+`)\b`, tagRepl)
	setPre(anyOf("<"))
	setNeeds(checked(func(t string) bool { return afterOpening(t, "<", "/", `\`) }))
	add("tag-engram", onFolded, `(?P<n>[/\\]?\s*engram[\s_\-.]*(?:memory|summary|block|context))\s*(?:`+gt+`|\]|\})`, tagRepl)
	setPre(anyOf("engram"))
	setNeeds(allOf(anyOf("memory", "summary", "block", "context"), anyOf(">", "]", "}")))
	add("tag-engram-open", onFolded, `(?:`+lt+`|\[|\{)\s*(?P<n>[/\\]?\s*engram[\s_\-.]*(?:memory|summary|block|context))`, tagRepl)
	setPre(anyOf("engram"))
	setNeeds(allOf(anyOf("memory", "summary", "block", "context"), anyOf("<", "[", "{")))
	add("a-tag-query", onFolded, lt+`\s*a\s[^<>]{0,200}?href\s*=\s*["']?\s*(?:(?:[a-z][a-z0-9+.\-]*:)?//[^"'\s<>]*[?#]|(?:javascript|vbscript|livescript)\s*:)[^<>]{0,300}`+gt+`?`, func(*views, *view, *regexp.Regexp, []int, int, int) (string, bool) {
		return "[link removed]", true
	})
	setPre(allOf(anyOf("<"), anyOf("href")))
	add("img-tag", onFolded, lt+`\s*(?:img|image|iframe|script|object|embed|link|meta|svg|video|audio|source)\b[^<>]{0,400}`+gt+`?`, func(*views, *view, *regexp.Regexp, []int, int, int) (string, bool) {
		return "[embedded content removed]", true
	})
	setPre(anyOf("<"))
	setNeeds(checked(func(t string) bool {
		return afterOpening(t, "<", "img", "image", "iframe", "script", "object", "embed", "link", "meta", "svg", "video", "audio", "source")
	}))
	// Role markers: the colon goes, the word stays.
	// the colon may follow a parenthesis ("Assistant (to itself):")
	// or a bracket ("System [urgent]:")
	roleEnd := `(?P<c>(?:\s*(?:\([^()\n]{0,40}\)|\[\p{L}[^\[\]\n]{0,39}\]))?[\s*_"'\]\)}]*:)`
	add("role-strong", onFolded, `(?:^|[^\p{L}\p{N}_./\\@$#%&=+\x60-])(?P<x>(?P<w>`+joinSep(strongRoles, `[\s_\-]*`)+`)`+roleEnd+`)`, roleRepl)
	setPre(allOf(anyOf(":"), anyOf(anchorWords(strongRoles, false)...)))
	setNeeds(phraseWhere(strongRoles, strongRoleStart, beforeRoleEnd))
	add("role-strong-cjk", onFolded, `(?:^|[^\p{L}\p{N}])(?P<x>(?P<w>`+litCJK(strongRolesCJK...)+`)`+roleEnd+`)`, roleRepl)
	setPre(allOf(anyOf(":"), anyOf(strongRolesCJK...)))
	add("role-weak", onFolded, `(?:^|\n|[.!?;|>]\s)[\s>*#\-]*(?P<x>(?P<w>`+joinSep(weakRoles, `[\s_\-]*`)+`)`+roleEnd+`)`, roleRepl)
	setPre(allOf(anyOf(":"), anyOf(anchorWords(weakRoles, false)...)))
	setNeeds(phraseWhere(weakRoles, weakRoleStart, beforeRoleEnd))
	add("role-heading", onFolded, `(?P<x>#{2,}\s*(?P<w>instruction|instructions|response|system|user|assistant|human|input|context|new instructions|system prompt|prompt))(?:[^\p{L}]|$)`, func(vs *views, v *view, re *regexp.Regexp, m []int, a, b int) (string, bool) {
		i, j, _ := groupSpan(re, m, "w")
		wa, wb := v.span(i, j)
		return vs.src[wa:wb], true
	})
	setPre(anyOf("##"))
	// Override phrases in every language, on the folded view; the English
	// core also on the letters, reversed and ROT13 views.
	for lang, l := range overrideLangs {
		add("override-"+lang, onFolded, overridePattern(l, false), unlessNegated)
		setPre(allOf(anyOf(anchorWords(l.verbs, l.cjk)...), anyOf(append(anchorWords(l.nouns, l.cjk), anchorWords(l.before, l.cjk)...)...)))
		setNeeds(overrideNeeds(l))
	}
	for i, f := range englishForms {
		add("override-en-"+string(rune('a'+i)), onFolded, f.re, notFreeTo)
		setPre(anyOf(f.anchors...))
		var needs []pred
		for _, n := range f.needs {
			needs = append(needs, phrases(false, n...))
		}
		setNeeds(allOf(needs...))
	}
	en := overrideLangs["en"]
	// the core needs one of coreAdjs, word for word: letters only, no
	// separator (a verb or an adjective of several words cannot match)
	coreAdjs := []string{"previous", "prior", "above", "earlier", "preceding", "former", "initial", "original", "system", "existing"}
	coreNouns := []string{"instructions", "instruction", "prompts", "prompt", "rules", "directions", "directives", "guidelines", "commands", "context", "messages", "orders", "programming"}
	core := lit(false, en.verbs...) + `(?:all|any|the|of|your|my|these|those|every|everything){0,3}` +
		lit(false, coreAdjs...) +
		lit(false, coreNouns...)
	stems := []string{"instruc", "prompt", "rules", "direct", "guidel", "comman", "context", "messag", "orders", "program"}
	verbStems := []string{"ignor", "disreg", "forget", "overr", "skip", "bypass", "drop", "discard", "abandon", "neglect", "dismiss",
		"nullif", "cancel", "erase", "delete", "clear", "aside", "throw", "attention", "follow", "obey", "listen", "break", "violat",
		"ditch", "scrap", "unlearn", "wipe"}
	letterPre := func(f func(string) string) pred {
		return allOf(letterAnchors.anyOf(mapStrings(stems, f)...), letterAnchors.anyOf(mapStrings(verbStems, f)...))
	}
	letterNeeds := func(f func(string) string) pred { return letterAnchors.anyOf(mapStrings(coreAdjs, f)...) }
	// All three prefilters read the letters view: a word is in the
	// reversed view when it is, reversed, in the letters view, and in the
	// ROT13 view when its ROT13 is (so the reversed and ROT13 views are
	// built only for a text that may hold an override there).
	same := func(s string) string { return s }
	add("override-letters", onLetters, core, nil)
	setPre(letterPre(same))
	setNeeds(letterNeeds(same))
	add("override-reversed", onReversed, core, nil)
	setPre(letterPre(reverseString))
	setNeeds(letterNeeds(reverseString))
	add("override-rot13", onROT13, core, nil)
	setPre(letterPre(rot13String))
	setNeeds(letterNeeds(rot13String))
	// Fake headers.
	add("header-own", onFolded, joinSep(ownHeaders, `[^\p{L}\p{N}\n]{1,3}`)+`(?:\s*\([^)\n]{0,120}\))?\s*[:\]]?`, wordStart)
	setPre(anyOf("standing", "recalled", "compacted", "end of", "engram", "memory block", "reference only", "system prompt", "of instructions"))
	setNeeds(phrases(false, ownHeaders...))
	hdrEnd := `\s*(?:\([^)\n]{0,120}\)\s*)?(?:[:\]|!]|={2,})`
	add("header-other", onFolded, `(?:^|[^\p{L}\p{N}])(?P<x>[\[#*=\-]*`+joinSep(otherHeaders, `[^\p{L}\p{N}\n]{1,3}`)+hdrEnd+`)`, nil)
	setPre(allOf(anyOf(":", "]", "|", "!"), anyOf(anchorWords(otherHeaders, false)...)))
	setNeeds(phraseWhere(otherHeaders, atStart, beforeHeaderEnd))
	add("header-cjk", onFolded, `(?P<x>[\[#*]*`+litCJK(cjkHeaders...)+`\s*[:\]])`, nil)
	setPre(anyOf(cjkHeaders...))
	capsHeaders := slices.Concat(otherHeaders, headingHeaders)
	add("header-heading", onFolded, `(?:^|\n)[ >]*(?P<x>(?:#{1,6}|={2,}|\*{2,}|-{3,}|\[)\s?`+joinSep(capsHeaders, `[^\p{L}\p{N}\n]{1,3}`)+`)(?:[^\p{L}\p{N}]|$)`, nil)
	setPre(anyOf("#", "==", "**", "---", "["))
	setNeeds(phrases(false, capsHeaders...))
	// the block's own headers spelled out letter by letter (S T A N D I N G)
	var ownJoined []string
	for _, h := range ownHeaders {
		if w := strings.Fields(h); len(w) > 1 && len(strings.Join(w, "")) >= 14 {
			ownJoined = append(ownJoined, strings.Join(w, ""))
		}
	}
	add("header-own-letters", onLetters, joinSep(ownJoined, ""), spacedOut)
	setPre(letterAnchors.anyOf(ownJoined...))
	add("header-caps", onFolded, `(?:^|[^\p{L}\p{N}])(?P<x>`+joinSep(capsHeaders, `[^\p{L}\p{N}\n]{1,3}`)+`)(?:[^\p{L}\p{N}]|$)`,
		func(vs *views, v *view, re *regexp.Regexp, m []int, a, b int) (string, bool) {
			// in capitals in the original: a header, whatever follows
			up := 0
			letters := 0
			for _, r := range vs.src[a:b] {
				if unicode.IsLetter(r) {
					letters++
					if unicode.IsUpper(r) {
						up++
					}
				}
			}
			return ellipsis, letters > 0 && up*10 >= letters*8
		})
	setPre(anyOf(anchorWords(capsHeaders, false)...))
	setNeeds(phraseWhere(capsHeaders, atStart, atEnd))
	nruleList[len(nruleList)-1].srcPre = hasCapitalRun
	// Exfiltrating links.
	add("md-image", onFolded, `!\s*\[(?P<alt>[^\]\n]{0,300})\]\s*\(\s*<?(?P<u>(?:[a-z][a-z0-9+.\-]*:)?//[^)\s>]*)[^)\n]{0,300}\)?`, imageRepl)
	setPre(allOf(anyOf("!"), anyOf("[")))
	// a link to a script ([x](javascript:...)) runs when clicked
	add("md-link-script", onFolded, `\[(?P<alt>[^\]\n]{0,300})\]\s*\(\s*<?\s*(?:javascript|vbscript|livescript)\s*:[^\n]{0,400}?\)`, func(vs *views, v *view, re *regexp.Regexp, m []int, a, b int) (string, bool) {
		text := ""
		if i, j, ok := groupSpan(re, m, "alt"); ok && i < j {
			aa, ab := v.span(i, j)
			text = strings.TrimSpace(vs.src[aa:ab])
		}
		return text + " (script link removed)", true
	})
	setPre(allOf(anyOf("]"), anyOf("script")))
	// any tag that loads a URL when rendered (<input type=image src=...>,
	// <body background=...>, <div style="background:url(//...)">)
	add("tag-url", onFolded, lt+`\s*[a-z][a-z0-9:\-]*\s[^<>]{0,400}?(?:\b(?:src|srcset|background|poster|data|action|formaction|lowsrc|dynsrc|ping|codebase|longdesc|manifest|icon|xlink:href)\s*=\s*["']?\s*|url\(\s*["']?\s*)(?:[a-z][a-z0-9+.\-]*:)?//[^<>]{0,400}`+gt+`?`, func(*views, *view, *regexp.Regexp, []int, int, int) (string, bool) {
		return "[embedded content removed]", true
	})
	setPre(allOf(anyOf("<"), anyOf("//")))
	add("md-image-ref", onFolded, `!\s*\[(?P<alt>[^\]\n]{0,300})\]\s*\[[^\]\n]{0,100}\]`, imageRepl)
	setPre(allOf(anyOf("!"), anyOf("[")))
	add("md-link-query", onFolded, `\[(?P<alt>[^\]\n]{0,300})\]\s*\(\s*<?(?P<u>(?:[a-z][a-z0-9+.\-]*:)?//[^)\s>]*[?#][^)\s>]*)[^)\n]{0,300}\)?`, linkRepl)
	setPre(allOf(anyOf("]"), anyOf("//")))
	add("md-ref-def-query", onFolded, `(?m)^\s*\[(?P<alt>[^\]\n]{1,100})\]:\s*<?(?P<u>(?:[a-z][a-z0-9+.\-]*:)?//\S*[?#]\S*)`, linkRepl)
	setPre(allOf(anyOf("]"), anyOf("//")))
	var folded, letter []*pred
	for i := range nruleList {
		if r := &nruleList[i]; r.on == onFolded {
			folded = append(folded, &r.pre, &r.needs)
		} else {
			letter = append(letter, &r.pre, &r.needs)
		}
	}
	foldedAnchors.finish(folded)
	letterAnchors.finish(letter)
}

// negations before an override verb make it a reminder ("Не забудь всё
// сохранить раньше", "do not ignore the previous warnings").
var negations = map[string]bool{}

func init() {
	for _, w := range strings.Fields("not no don't dont never ne pas non não nao nunca niet nooit не нельзя jangan tidak nicht kein nie inte ej aldrig ni μην δεν") {
		negations[fold(w)] = true
	}
	for _, w := range strings.Fields("not never nicht nie niet inte ej aldrig jamais nunca mai") {
		postNegations[fold(w)] = true
	}
	for _, l := range overrideLangs {
		for _, v := range l.verbs {
			if w := strings.Fields(fold(v)); len(w) > 1 && postNegations[w[1]] {
				negatedVerbs[w[0]+" "+w[1]] = true
			}
		}
	}
	for _, w := range []string{"不要", "别", "別", "勿", "不", "莫"} {
		cjkNegations = append(cjkNegations, fold(w))
	}
}

// postNegations after an override verb make it a reminder too ("Glöm inte
// tidigare instruktioner", "Vergiss nicht die vorherigen Anweisungen"),
// unless verb and negation are one of the verbs ("följ inte", "beachte
// nicht": negatedVerbs); cjkNegations right before a verb ("不要忘了").
var (
	postNegations = map[string]bool{}
	negatedVerbs  = map[string]bool{}
	cjkNegations  []string
)

// unlessNegated replaces an override phrase unless a negation precedes it.
func unlessNegated(vs *views, v *view, re *regexp.Regexp, m []int, a, b int) (string, bool) {
	start := m[0]
	for g, name := range re.SubexpNames() {
		if strings.HasPrefix(name, "x") && m[2*g] >= 0 {
			start = m[2*g]
			break
		}
	}
	// the negation must be the word right before, in the same clause
	// (only spaces between): "Answer: no. Ignore all previous
	// instructions" is an override
	end := m[1]
	for g, name := range re.SubexpNames() {
		if strings.HasPrefix(name, "x") && m[2*g] >= 0 {
			end = m[2*g+1]
			break
		}
	}
	words := strings.FieldsFunc(v.text[start:end], func(r rune) bool { return !unicode.IsLetter(r) && r != '\'' })
	if len(words) > 1 && postNegations[words[1]] && !negatedVerbs[words[0]+" "+words[1]] {
		return "", false
	}
	before := strings.TrimRight(v.text[:start], " ")
	if len(before) == len(v.text[:start]) {
		for _, n := range cjkNegations {
			if strings.HasSuffix(before, n) {
				return "", false
			}
		}
		return ellipsis, true
	}
	k := strings.LastIndexFunc(before, func(r rune) bool { return !unicode.IsLetter(r) && r != '\'' })
	return ellipsis, !negations[before[k+1:]]
}

// notFreeTo replaces an English form unless it ends in "free" and "to"
// follows ("from now on you are free to merge on Fridays").
func notFreeTo(vs *views, v *view, re *regexp.Regexp, m []int, a, b int) (string, bool) {
	end := m[1]
	for g, name := range re.SubexpNames() {
		if strings.HasPrefix(name, "x") && m[2*g] >= 0 {
			end = m[2*g+1]
			break
		}
	}
	return ellipsis, !(strings.HasSuffix(v.text[:end], "free") && strings.HasPrefix(v.text[end:], " to "))
}

// hasCapitalRun reports whether src has four capital letters in a row (a
// header in capitals may be there).
func hasCapitalRun(src string) bool {
	n := 0
	for _, r := range src {
		if unicode.IsUpper(r) {
			if n++; n >= 4 {
				return true
			}
		} else if !unicode.IsSpace(r) {
			n = 0
		}
	}
	return false
}

// groupSpan returns the view span of the named group of r's match m.
func groupSpan(re *regexp.Regexp, m []int, name string) (int, int, bool) {
	g := re.SubexpIndex(name)
	if g < 0 || 2*g+1 >= len(m) || m[2*g] < 0 {
		return 0, 0, false
	}
	return m[2*g], m[2*g+1], true
}

// spacedOut replaces a letters view's match spelled out letter by letter
// in the original (S T A N D I N G, S.T.A.N.D.I.N.G), starting and ending
// a word: the folded view's rules read the words as they are.
func spacedOut(vs *views, v *view, re *regexp.Regexp, m []int, a, b int) (string, bool) {
	before, _ := utf8.DecodeLastRuneInString(vs.src[:a])
	after, _ := utf8.DecodeRuneInString(vs.src[b:])
	letters, others := 0, 0
	for _, r := range vs.src[a:b] {
		if isWordRune(r) {
			letters++
		} else {
			others++
		}
	}
	return ellipsis, (a == 0 || !isWordRune(before)) && (b == len(vs.src) || !isWordRune(after)) && 2*others >= letters
}

// wordStart replaces a match that starts a word of the view
// ("understanding instructions" holds no "standing instructions").
func wordStart(vs *views, v *view, re *regexp.Regexp, m []int, a, b int) (string, bool) {
	before, _ := utf8.DecodeLastRuneInString(v.text[:m[0]])
	return ellipsis, m[0] == 0 || !isWordRune(before)
}

func tagRepl(vs *views, v *view, re *regexp.Regexp, m []int, a, b int) (string, bool) {
	i, j, ok := groupSpan(re, m, "n")
	if !ok {
		return ellipsis, true
	}
	name := strings.Join(strings.Fields(strings.Trim(v.text[i:j], `\!- `)), " ")
	name = strings.ReplaceAll(name, `\`, `/`)
	return "(" + name + ")", true
}

func roleRepl(vs *views, v *view, re *regexp.Regexp, m []int, a, b int) (string, bool) {
	if _, c, ok := groupSpan(re, m, "c"); ok && strings.HasPrefix(v.text[c:], "=") {
		return "", false // admin := x is an assignment
	}
	i, j, ok := groupSpan(re, m, "w")
	if !ok {
		return ellipsis, true
	}
	wa, wb := v.span(i, j)
	return vs.src[wa:wb], true
}

func imageRepl(vs *views, v *view, re *regexp.Regexp, m []int, a, b int) (string, bool) {
	alt := ""
	if i, j, ok := groupSpan(re, m, "alt"); ok && i < j {
		aa, ab := v.span(i, j)
		alt = strings.TrimSpace(vs.src[aa:ab])
	}
	host := ""
	if i, j, ok := groupSpan(re, m, "u"); ok && i < j {
		host = hostOf(v.text[i:j])
	}
	out := "[image"
	if alt != "" {
		out += ": " + alt
	}
	if host != "" {
		out += "; link to " + host + " removed"
	}
	return out + "]", true
}

func linkRepl(vs *views, v *view, re *regexp.Regexp, m []int, a, b int) (string, bool) {
	text := ""
	if i, j, ok := groupSpan(re, m, "alt"); ok && i < j {
		aa, ab := v.span(i, j)
		text = strings.TrimSpace(vs.src[aa:ab])
	}
	host := ""
	if i, j, ok := groupSpan(re, m, "u"); ok {
		host = hostOf(v.text[i:j])
	}
	return text + " (link to " + host + ", query removed)", true
}

func hostOf(u string) string {
	u = strings.Trim(u, "<> ")
	if strings.HasPrefix(u, "//") {
		u = "https:" + u
	}
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		if i := strings.Index(u, "://"); i >= 0 {
			u = u[i+3:]
		}
		if i := strings.IndexAny(u, "/?#"); i >= 0 {
			u = u[:i]
		}
		return strings.Trim(u, ".:")
	}
	return p.Hostname()
}

// decodeRun decodes a hex or base64 run into text, if it is text.
func decodeRun(run string) (string, bool) {
	var cands [][]byte
	if len(run)%2 == 0 {
		if b, err := hex.DecodeString(run); err == nil {
			cands = append(cands, b)
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(run); err == nil {
			cands = append(cands, b)
			break
		}
	}
	for _, b := range cands {
		if !utf8.Valid(b) {
			continue
		}
		s := string(b)
		printable, letters := 0, 0
		for _, r := range s {
			if unicode.IsPrint(r) || r == '\n' || r == '\t' {
				printable++
			}
			if unicode.IsLetter(r) {
				letters++
			}
		}
		n := utf8.RuneCountInString(s)
		if n > 0 && printable*10 >= n*9 && letters*2 >= n {
			return s, true
		}
	}
	return "", false
}
