package contract

import "strings"

// trickyIDs are ids whose subject tokens every client must get right.
var trickyIDs = []string{
	"", "acme", "acme/web", "chat 42", "a.b", "*", ">", "%", "%41", "-_:@", "AZaz09",
	"ü", "日本語", "🦀", "tab\there", "nul\x00", "$JS.API", "_INBOX.x", "acme corp",
	"a%2Fb", "~!#&()+=,;'\"`<>?[]{}|\\^",
}

// badTokens are tokens DecodeToken refuses: not canonical, or not a token.
var badTokens = []string{
	"",       // no token: the empty id is "%"
	"a%2f",   // lower-case hex
	"%41",    // an escaped byte that stays as it is ('A')
	"%2",     // a cut escape
	"%zz",    // not hex
	"a b",    // a byte that must be escaped
	"a.b",    // a dot
	"acme/w", // a slash
	"é",      // a non-ASCII byte, unescaped
}

// subjectRefs are tenant, project and session ids of the subject vectors.
var subjectRefs = [][3]string{
	{"", "acme/web", "chat 42"},
	{"acme corp", "p", "s"},
	{"ü", "日本語", "a.b"},
	{"%", "*", ">"},
}

type handVector struct {
	name, body string
	field      string // the error's field ("" a body-level error, "*" any)
	schema     bool   // the JSON Schema refuses it (too, for a refusal)
}

// head is a valid envelope's head without its closing brace, for the hand
// vectors: they add fields or a payload.
const head = `{"id":"01HWTQ5Z8Q4W6V2K9T0M5R7XBC","type":"tokens_reported","version":1,"occurred_at":"2024-05-01T12:00:00.123Z","project_id":"acme/web","session_id":"chat 42"`

// handDecode are bodies that decode, beside the examples and their
// mutations.
var handDecode = []handVector{
	{name: "unknown fields are ignored, at every level", body: head + `,"future":{"x":[1,2]},"payload":{"input_tokens":5,"later":true}}`},
	// A reader takes null as absent; the schemas do not allow it (a
	// producer leaves the field out).
	{name: "null is absent", body: head + `,"tenant_id":null,"turn_id":null,"payload":{"input_tokens":null,"stack_id":null}}`, schema: true},
	{name: "an empty payload object", body: head + `,"payload":{}}`},
	{name: "escapes in ids decode", body: `{"id":"\u0030\u0031H","type":"tokens_reported","version":1,"occurred_at":"2024-05-01T12:00:00Z","project_id":"acme\/web","session_id":"chat\u002042","payload":{}}`},
	{name: "a surrogate pair escape is one character", body: head + `,"tenant_id":"\ud83e\udd80","payload":{}}`},
	{name: "raw non-ASCII ids", body: head + `,"tenant_id":"ünïcødé 日本 🦀","payload":{}}`},
	{name: "the default tenant spelled empty", body: head + `,"tenant_id":"","payload":{}}`},
	{name: "project_names keys are data: case-different keys are distinct", body: `{"id":"01HWTQ5Z8Q4W6V2K9T0M5R7XBC","type":"turn_started","version":1,"occurred_at":"2024-05-01T12:00:00Z","project_id":"p","session_id":"s","turn_id":"t","payload":{"text":"hi","project_names":{"a":"x","A":"y","TEXT":"z"}}}`},
	{name: "memory_changed needs no session", body: `{"id":"x1","type":"memory_changed","version":1,"occurred_at":"2024-05-01T12:00:00Z","project_id":"p","payload":{"changes":[{"id":"n1","kind":"a_future_kind"}]}}`},
	{name: "a tool message's status", body: `{"id":"x2","type":"turn_ended","version":1,"occurred_at":"2024-05-01T12:00:00Z","project_id":"p","session_id":"s","turn_id":"t","payload":{"messages":[{"role":"tool","content":"","tool_status":"failed"}]}}`},
	{name: "whitespace around tokens", body: " \n\t" + head + " , \"payload\" : { } } \n"},
}

// handRefuse are bodies the decoder refuses, beside the mutations.
var handRefuse = []handVector{
	{name: "a key twice at the top", body: head + `,"tenant_id":"a","tenant_id":"b","payload":{}}`, field: "tenant_id"},
	{name: "a key twice in the payload", body: head + `,"payload":{"input_tokens":1,"input_tokens":2}}`, field: "payload.input_tokens"},
	{name: "a key twice in a nested object", body: `{"id":"x","type":"turn_ended","version":1,"occurred_at":"2024-05-01T12:00:00Z","project_id":"p","session_id":"s","turn_id":"t","payload":{"messages":[{"role":"user","content":"a"},{"role":"user","role":"tool","content":"b"}]}}`, field: "payload.messages[1].role"},
	{name: "a key twice, the second escaped", body: head + `,"tenant_id":"a","tenant_\u0069d":"b","payload":{}}`, field: "tenant_id"},
	{name: "a field spelled in upper case", body: head + `,"TENANT_ID":"a","payload":{}}`, field: "TENANT_ID"},
	{name: "a field spelled in mixed case", body: head + `,"Tenant_Id":"a","payload":{}}`, field: "Tenant_Id"},
	{name: "a field spelled with the Kelvin sign", body: head + `,"payload":{"stac\u212a_id":"x"}}`, field: "payload.stac\u212a_id"},
	{name: "a field spelled with a long s", body: head + `,"\u017fession_id":"other","payload":{}}`, field: "ſession_id"},
	{name: "project_names: an exact duplicate key", body: `{"id":"x","type":"turn_started","version":1,"occurred_at":"2024-05-01T12:00:00Z","project_id":"p","session_id":"s","turn_id":"t","payload":{"text":"hi","project_names":{"a":"x","a":"y"}}}`, field: "payload.project_names.a"},
	{name: "invalid UTF-8 in an id", body: head + ",\"tenant_id\":\"a\xffb\",\"payload\":{}}", field: ""},
	{name: "a truncated UTF-8 sequence", body: head + ",\"tenant_id\":\"a\xe2\x82\",\"payload\":{}}", field: ""},
	{name: "an overlong UTF-8 encoding", body: head + ",\"tenant_id\":\"\xc0\xaf\",\"payload\":{}}", field: ""},
	{name: "a UTF-8 encoded surrogate", body: head + ",\"tenant_id\":\"\xed\xa0\x80\",\"payload\":{}}", field: ""},
	{name: "a lone high surrogate escape", body: head + `,"tenant_id":"\ud800","payload":{}}`, field: ""},
	{name: "a lone low surrogate escape", body: head + `,"tenant_id":"a\udc00","payload":{}}`, field: ""},
	{name: "a high surrogate escape before a non-surrogate", body: head + `,"tenant_id":"\ud800\u0041","payload":{}}`, field: ""},
	{name: "malformed JSON: cut short", body: head + `,"payload":{`, field: ""},
	{name: "malformed JSON: a trailing comma", body: head + `,"payload":{},}`, field: ""},
	{name: "not an object: an array", body: `[1,2]`, field: "", schema: true},
	{name: "not an object: null", body: `null`, field: "", schema: true},
	{name: "not an object: a string", body: `"event"`, field: "", schema: true},
	{name: "an empty body", body: ``, field: ""},
	{name: "every head field missing", body: `{"payload":{}}`, field: "id", schema: true},
	{name: "an output type's payload in an input event", body: `{"id":"x","type":"turn_ended","version":1,"occurred_at":"2024-05-01T12:00:00Z","project_id":"p","session_id":"s","turn_id":"t","payload":{"in_reply_to":"x"}}`, field: "*", schema: true},
	{name: "an unknown type", body: `{"id":"x","type":"bogus","version":1,"occurred_at":"2024-05-01T12:00:00Z","project_id":"p","payload":{}}`, field: "type", schema: true},
	{name: "a mistyped head field and a missing one", body: `{"id":7,"type":"tokens_reported","version":1,"occurred_at":"2024-05-01T12:00:00Z","session_id":"s","payload":{}}`, field: "id", schema: true},
	{name: "a tool message without status and a tool call without name", body: `{"id":"x","type":"turn_ended","version":1,"occurred_at":"2024-05-01T12:00:00Z","project_id":"p","session_id":"s","turn_id":"t","payload":{"messages":[{"role":"assistant","content":"","tool_calls":[{"id":"c"}]},{"role":"tool","content":"r"}]}}`, field: "payload.messages[1].tool_status", schema: true},
	{name: "an unknown tool status", body: `{"id":"x","type":"turn_ended","version":1,"occurred_at":"2024-05-01T12:00:00Z","project_id":"p","session_id":"s","turn_id":"t","payload":{"messages":[{"role":"tool","content":"r","tool_status":"maybe"}]}}`, field: "payload.messages[0].tool_status", schema: true},
	{name: "a null message", body: `{"id":"x","type":"turn_ended","version":1,"occurred_at":"2024-05-01T12:00:00Z","project_id":"p","session_id":"s","turn_id":"t","payload":{"messages":[null]}}`, field: "payload.messages[0].role", schema: true},
	{name: "an id of 257 bytes", body: head[:len(head)-len(`"session_id":"chat 42"`)] + `"session_id":"` + strings.Repeat("s", 257) + `","payload":{}}`, field: "session_id", schema: true},
}
