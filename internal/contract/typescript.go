package contract

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/engram-memory/engram/pkg/events"
)

// TypeScript returns clients/typescript/src/contract.ts: the types of the
// envelope and every payload, the constants of the contract and the
// shapes the client's decoder checks, from the same schemas as the
// AsyncAPI document.
func TypeScript() ([]byte, error) {
	if errs := CheckSpecs(); len(errs) > 0 {
		return nil, errs[0]
	}
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("// Engram's event contract: types and constants. Generated from the Go types of\n")
	w("// pkg/events by internal/contract (`engram contract`, or `go generate\n")
	w("// ./internal/contract`), with api/asyncapi.yaml: do not edit.\n\n")

	w("/** The envelope schema version this client writes and the newest it reads. */\n")
	w("export const SCHEMA_VERSION = %d;\n", events.SchemaVersion)
	w("/** The first subject token(s) of every Engram subject, unless configured. */\n")
	w("export const DEFAULT_PREFIX = %s;\n", strconv.Quote(events.DefaultPrefix))
	w("/** The longest id (event, tenant, project, session, turn), in UTF-8 bytes. */\n")
	w("export const MAX_ID_BYTES = %d;\n", events.MaxIDLen)
	w("/** The largest input event body ENGRAM_IN takes by default, in bytes. */\n")
	w("export const DEFAULT_MAX_EVENT_BYTES = %d;\n", events.DefaultMaxEventBytes)
	w("/** How long inject waits for the memory block by default (ms). */\n")
	w("export const DEFAULT_INJECT_TIMEOUT_MS = %d;\n", events.DefaultInjectTimeout.Milliseconds())
	w("/** How long context waits for each page by default (ms). */\n")
	w("export const DEFAULT_CONTEXT_TIMEOUT_MS = %d;\n", events.DefaultContextTimeout.Milliseconds())
	w("/** No timestamp of an event is before this. */\n")
	w("export const EARLIEST_TIME = %s;\n", strconv.Quote(events.EarliestTime.Format(time.RFC3339)))
	w("/** How far ahead of the reader's clock a timestamp may be (ms). */\n")
	w("export const MAX_CLOCK_AHEAD_MS = %d;\n", events.MaxClockAhead.Milliseconds())
	w("/** The reply-inbox prefix of the default tenant's replies. */\n")
	w("export const DEFAULT_REPLY_PREFIX = %s;\n", strconv.Quote(events.DefaultReplyPrefix))
	w("/** The first token of every named tenant's reply inbox. */\n")
	w("export const TENANT_INBOX_ROOT = %s;\n", strconv.Quote(events.TenantInboxRoot))
	w("/** The first token of the inboxes of Engram's own processes. */\n")
	w("export const ENGRAM_INBOX_ROOT = %s;\n", strconv.Quote(events.EngramInboxRoot))
	w("/** The queue group of the context service. */\n")
	w("export const CONTEXT_QUEUE = %s;\n\n", strconv.Quote(events.ContextQueue))

	w("/** The streams. */\n")
	w("export const STREAMS = { in: %s, out: %s, dlq: %s } as const;\n\n", strconv.Quote(events.StreamIn), strconv.Quote(events.StreamOut), strconv.Quote(events.StreamDLQ))

	w("/** Headers of published events and dead letters. */\n")
	w("export const HEADERS = {\n")
	for _, h := range [][2]string{{"msgId", events.HeaderMsgID}, {"type", events.HeaderType}, {"version", events.HeaderVersion},
		{"dlqReason", events.HeaderDLQReason}, {"dlqConsumer", events.HeaderDLQConsumer}, {"dlqSubject", events.HeaderDLQSubject},
		{"dlqStream", events.HeaderDLQStream}, {"dlqSequence", events.HeaderDLQSequence}, {"dlqDeliveries", events.HeaderDLQDeliveries},
		{"dlqMsgId", events.HeaderDLQMsgID}, {"dlqTime", events.HeaderDLQTime}, {"dlqTruncated", events.HeaderDLQTruncated}} {
		w("  %s: %s,\n", h[0], strconv.Quote(h[1]))
	}
	w("} as const;\n\n")

	list := func(ts []events.Type) string {
		var q []string
		for _, t := range ts {
			q = append(q, strconv.Quote(string(t)))
		}
		return strings.Join(q, ", ")
	}
	w("/** The input event types (a platform publishes them). */\n")
	w("export const INPUT_TYPES = [%s] as const;\n", list(events.InputTypes))
	w("/** The output event types (Engram publishes them). */\n")
	w("export const OUTPUT_TYPES = [%s] as const;\n", list(events.OutputTypes))
	w("export type InputType = (typeof INPUT_TYPES)[number];\n")
	w("export type OutputType = (typeof OUTPUT_TYPES)[number];\n")
	w("export type EventType = InputType | OutputType;\n\n")

	enumType := func(name, doc string, vals []string, open bool) {
		var q []string
		for _, v := range vals {
			q = append(q, strconv.Quote(v))
		}
		w("/** %s */\n", doc)
		if open {
			w("export type %s = %s | (string & {});\n", name, strings.Join(q, " | "))
		} else {
			w("export type %s = %s;\n", name, strings.Join(q, " | "))
		}
		w("export const %s_VALUES = [%s] as const;\n\n", strings.ToUpper(snake(name)), strings.Join(q, ", "))
	}
	enumType("Role", "Who wrote a message.", specs[reflect.TypeFor[events.Message]()]["role"].enum, false)
	enumType("ToolStatus", "The outcome of a tool call.", specs[reflect.TypeFor[events.Message]()]["tool_status"].enum, false)
	enumType("ChangeKind", "What happened to a memory (a reader tolerates kinds it does not know).", specs[reflect.TypeFor[events.Change]()]["kind"].enum, true)

	// Interfaces.
	for _, t := range components {
		if err := tsInterface(&b, t); err != nil {
			return nil, err
		}
	}
	w("/** The payload of each event type. */\n")
	w("export interface PayloadOf {\n")
	for _, t := range allTypes() {
		w("  %s: %s;\n", t, payloadTypes[t].Name())
	}
	w("}\n\n")
	env := reflect.TypeFor[events.Envelope]()
	w("/** %s */\n", tsDoc(envelopeDoc))
	w("export interface Envelope<T extends EventType = EventType> {\n")
	for _, f := range jsonFields(env) {
		sp, _ := specFor(env, f.Name)
		opt := "?"
		if sp.required {
			opt = ""
		}
		typ := ""
		switch f.Name {
		case "type":
			typ = "T"
		case "payload":
			typ = "PayloadOf[T]"
		default:
			var err error
			if typ, err = tsType(f.Field.Type); err != nil {
				return nil, err
			}
		}
		w("  /** %s */\n  %s%s: %s;\n", tsDoc(sp.doc), f.Name, opt, typ)
	}
	w("}\n\n")
	w("/** An event of any type, narrowed by its type. */\n")
	w("export type AnyEnvelope = { [T in EventType]: Envelope<T> }[EventType];\n\n")

	// Shapes.
	w("/** The JSON shape of a field, as the decoder checks it. */\n")
	w("export type Shape = \"string\" | \"integer\" | \"number\" | \"boolean\" | \"time\" | \"object\" | { ref: string } | { array: Shape } | { map: Shape };\n\n")
	w("/** The fields of each object of the contract and their shapes, in the Go types' order. */\n")
	w("export const SHAPES: Record<string, Record<string, Shape>> = {\n")
	for _, t := range append([]reflect.Type{env}, components...) {
		w("  %s: {", t.Name())
		var parts []string
		for _, f := range jsonFields(t) {
			sh, err := tsShape(f.Field.Type)
			if err != nil {
				return nil, err
			}
			parts = append(parts, fmt.Sprintf(" %s: %s", f.Name, sh))
		}
		w("%s },\n", strings.Join(parts, ","))
	}
	w("};\n\n")
	w("/** The payload object of each event type. */\n")
	w("export const PAYLOAD_OBJECT: Record<EventType, string> = {\n")
	for _, t := range allTypes() {
		w("  %s: %s,\n", t, strconv.Quote(payloadTypes[t].Name()))
	}
	w("};\n\n")
	w("/** The JSON names of every field of the envelope and its payloads: a key that differs from one of them only in case is refused. */\n")
	w("export const KNOWN_FIELDS: readonly string[] = [%s];\n\n", quoteAll(knownFieldNames()))
	w("/** Objects whose keys are data (a map), not field names. */\n")
	w("export const MAP_FIELDS: readonly string[] = [\"project_names\"];\n")
	return []byte(b.String()), nil
}

func quoteAll(ss []string) string {
	var q []string
	for _, s := range ss {
		q = append(q, strconv.Quote(s))
	}
	return strings.Join(q, ", ")
}

// knownFieldNames are the JSON names of the envelope's and the payloads'
// fields, as events.Decode knows them (sorted).
func knownFieldNames() []string {
	seen := map[string]bool{}
	var walk func(t reflect.Type)
	visited := map[reflect.Type]bool{}
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t == timeType || visited[t] {
			return
		}
		visited[t] = true
		for _, f := range jsonFields(t) {
			seen[f.Name] = true
			walk(f.Field.Type)
		}
	}
	walk(reflect.TypeFor[events.Envelope]())
	for _, t := range allTypes() {
		walk(payloadTypes[t])
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func tsDoc(s string) string { return strings.ReplaceAll(s, "*/", "* /") }

func tsInterface(b *strings.Builder, t reflect.Type) error {
	fmt.Fprintf(b, "/** %s */\n", tsDoc(componentDocs[t.Name()]))
	fmt.Fprintf(b, "export interface %s {\n", t.Name())
	for _, f := range jsonFields(t) {
		sp, err := specFor(f.Owner, f.Name)
		if err != nil {
			return err
		}
		typ, err := tsType(f.Field.Type)
		if err != nil {
			return err
		}
		switch {
		case f.Name == "role" && f.Owner == reflect.TypeFor[events.Message]():
			typ = "Role"
		case f.Name == "tool_status":
			typ = "ToolStatus"
		case f.Name == "kind" && f.Owner == reflect.TypeFor[events.Change]():
			typ = "ChangeKind"
		}
		opt := "?"
		if sp.required {
			opt = ""
		}
		fmt.Fprintf(b, "  /** %s */\n  %s%s: %s;\n", tsDoc(sp.doc), f.Name, opt, typ)
	}
	b.WriteString("}\n\n")
	return nil
}

func tsType(t reflect.Type) (string, error) {
	switch {
	case t == timeType:
		return "string", nil
	case t.Kind() == reflect.String:
		return "string", nil
	case t.Kind() == reflect.Int, t.Kind() == reflect.Int64, t.Kind() == reflect.Float64:
		return "number", nil
	case t.Kind() == reflect.Bool:
		return "boolean", nil
	case t.Kind() == reflect.Slice:
		e, err := tsType(t.Elem())
		return e + "[]", err
	case t.Kind() == reflect.Map:
		e, err := tsType(t.Elem())
		return "Record<string, " + e + ">", err
	case t.Kind() == reflect.Struct && slices.Contains(components, t):
		return t.Name(), nil
	}
	return "", fmt.Errorf("contract: no TypeScript type for %s", t)
}

func tsShape(t reflect.Type) (string, error) {
	switch {
	case t == timeType:
		return `"time"`, nil
	case t.Kind() == reflect.String:
		return `"string"`, nil
	case t.Kind() == reflect.Int, t.Kind() == reflect.Int64:
		return `"integer"`, nil
	case t.Kind() == reflect.Float64:
		return `"number"`, nil
	case t.Kind() == reflect.Bool:
		return `"boolean"`, nil
	case t.Kind() == reflect.Interface:
		return `"object"`, nil
	case t.Kind() == reflect.Slice:
		e, err := tsShape(t.Elem())
		return "{ array: " + e + " }", err
	case t.Kind() == reflect.Map:
		e, err := tsShape(t.Elem())
		return "{ map: " + e + " }", err
	case t.Kind() == reflect.Struct && slices.Contains(components, t):
		return `{ ref: "` + t.Name() + `" }`, nil
	}
	return "", fmt.Errorf("contract: no shape for %s", t)
}
