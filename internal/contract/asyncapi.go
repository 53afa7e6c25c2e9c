package contract

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/pkg/events"
)

// AsyncAPIVersion is the AsyncAPI specification the document follows.
const AsyncAPIVersion = "3.0.0"

// camel turns turn_started into turnStarted.
func camel(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// channel is one channel of the document.
type channel struct {
	id, address, title, doc string
	params                  []string
	messages                []string // component message ids
}

// channels lists the document's channels: the input types', the output
// types' (memory_changed twice: with and without a session), the injection
// reply, the context API and its reply, the dead letters.
func channels() []channel {
	s := events.Subjects{}
	// The addresses with their parameters, {name} as AsyncAPI writes
	// them (EncodeToken would escape the braces).
	in := func(t events.Type) string {
		return events.DefaultPrefix + ".in." + string(t) + ".{tenant}.{project}.{session}"
	}
	out_ := func(t events.Type, session bool) string {
		a := events.DefaultPrefix + ".out." + string(t) + ".{tenant}.{project}"
		if session {
			a += ".{session}"
		}
		return a
	}
	var out []channel
	for _, t := range events.InputTypes {
		out = append(out, channel{
			id:       camel(string(t)),
			address:  in(t),
			title:    string(t),
			doc:      fmt.Sprintf("Input events of type %s, stored in the stream %s (%s). A platform publishes them with JetStream (it waits for the stream's acknowledgement) with the headers below; ENGRAM_IN refuses a body over its maximum event size (%d bytes by default) and any subject of another shape.", t, events.StreamIn, s.InStream(t), events.DefaultMaxEventBytes),
			params:   []string{"tenant", "project", "session"},
			messages: []string{camel(string(t))},
		})
	}
	for _, t := range events.OutputTypes {
		c := channel{
			id:       camel(string(t)),
			address:  out_(t, true),
			title:    string(t),
			doc:      fmt.Sprintf("Output events of type %s, stored in the stream %s (%s, a day and 256 MiB by default, oldest dropped).", t, events.StreamOut, s.OutAll()),
			params:   []string{"tenant", "project", "session"},
			messages: []string{camel(string(t))},
		}
		if t == events.TypeMemoryChanged {
			c.doc += " A change with a session is published on this subject; a project-level change (no session) on " + camel(string(t)) + "Project."
			out = append(out, c, channel{
				id:       camel(string(t)) + "Project",
				address:  out_(t, false),
				title:    string(t) + " (no session)",
				doc:      "memory_changed events of a project-level edit (no session_id), in " + events.StreamOut + ".",
				params:   []string{"tenant", "project"},
				messages: []string{camel(string(t))},
			})
			continue
		}
		out = append(out, c)
	}
	out = append(out,
		channel{
			id:       "injectionReply",
			title:    "injection reply",
			doc:      "The reply of the injector to a turn_started: a core NATS message (no headers) on the event's payload.reply_to, which must be a subject in the reply inbox of the event's tenant: under _INBOX. for the default tenant (or a configured reply prefix), under _INBOX_TENANT.<tenant token>. for a named tenant, nowhere else. It is also published as injection_ready on ENGRAM_OUT.",
			messages: []string{"injectionReply"},
		},
		channel{
			id:       "contextRequest",
			address:  events.DefaultPrefix + ".api.context.{tenant}.{project}.{session}",
			title:    "context API",
			doc:      "Core NATS request/reply, outside every stream: what a platform sends its model of the earlier turns (the compacted summary and the messages after it). The compactor answers, in the queue group " + events.ContextQueue + ", to the request's reply subject only when it is in the tenant's reply inbox. No responder, or no answer within the platform's timeout (5 s by default), means: send the platform's own history.",
			params:   []string{"tenant", "project", "session"},
			messages: []string{"contextRequest"},
		},
		channel{
			id:       "contextReply",
			title:    "context reply",
			doc:      "The answer to a context request, on the request's reply subject. A reply never exceeds the connection's maximum payload: with more set, ask again with after_id = last_id.",
			messages: []string{"contextReply"},
		},
		channel{
			id:       "deadLetters",
			address:  events.DefaultPrefix + ".dlq.{consumer}",
			title:    "dead letters",
			doc:      "Events a worker could not process (invalid, or failed on its last delivery), stored in " + events.StreamDLQ + " with the reason in the headers; `engram dlq` lists, shows and replays them.",
			params:   []string{"consumer"},
			messages: []string{"deadLetter"},
		},
	)
	return out
}

// messageDoc is one component message.
type messageDoc struct {
	id, name, title, summary string
	contentType              string
	headers                  string // component schema name
	payload                  *Schema
	correlation              string // component correlation id
	example                  []byte // JSON payload
}

// Document returns the AsyncAPI document of the contract (YAML).
func Document() ([]byte, error) {
	if errs := CheckSpecs(); len(errs) > 0 {
		return nil, errs[0]
	}
	s := events.Subjects{}
	root := &yaml.Node{Kind: yaml.MappingNode}
	add(root, "asyncapi", AsyncAPIVersion)
	add(root, "id", "urn:engram-memory:engram:events")
	add(root, "info", mapping(
		"title", "Engram events",
		"version", strconv.Itoa(events.SchemaVersion),
		"description", infoDoc,
		"tags", []*yaml.Node{mapping("name", "input", "description", "Published by chat platforms into ENGRAM_IN."),
			mapping("name", "output", "description", "Published by Engram's workers into ENGRAM_OUT.")},
	))
	add(root, "defaultContentType", "application/json")

	var sec []*yaml.Node
	for _, name := range []string{"userPassword", "token", "creds", "clientCertificate"} {
		sec = append(sec, ref("#/components/securitySchemes/"+name))
	}
	add(root, "servers", mapping("engram-serve", mapping(
		"host", "127.0.0.1:4222",
		"protocol", "nats",
		"title", "engram serve",
		"description", "The NATS server with JetStream that `engram serve` embeds (listening on localhost by default), or an external NATS configured with deploy/nats/accounts.conf. No anonymous client: every connection authenticates as one of the roles (see the security schemes); the subject prefix `"+events.DefaultPrefix+"` is configurable (ENGRAM_SUBJECT_PREFIX).",
		"security", sec,
	)))

	chs := mapping()
	for _, c := range channels() {
		m := mapping()
		if c.address != "" {
			add(m, "address", c.address)
		} else {
			add(m, "address", nil)
		}
		add(m, "title", c.title)
		add(m, "description", c.doc)
		if len(c.params) > 0 {
			ps := mapping()
			for _, p := range c.params {
				add(ps, p, ref("#/components/parameters/"+p))
			}
			add(m, "parameters", ps)
		}
		ms := mapping()
		for _, id := range c.messages {
			add(ms, id, ref("#/components/messages/"+id))
		}
		add(m, "messages", ms)
		add(chs, c.id, m)
	}
	add(root, "channels", chs)

	ops := mapping()
	opMsg := func(ch, msg string) []*yaml.Node { return []*yaml.Node{ref("#/channels/" + ch + "/messages/" + msg)} }
	for _, t := range events.InputTypes {
		id := camel(string(t))
		op := mapping(
			"action", "receive",
			"channel", ref("#/channels/"+id),
			"title", "Engram receives "+string(t),
			"summary", typeDocs[t],
			"tags", []*yaml.Node{mapping("name", "input")},
			"messages", opMsg(id, id),
		)
		if t == events.TypeTurnStarted {
			add(op, "description", "Request/reply: a platform publishes turn_started with payload.reply_to set to a fresh subject in its tenant's reply inbox and payload.reply_by to its deadline (1.5 s after it asked, by default), and waits there for the injection_ready whose in_reply_to is the event's id. No answer by the deadline: the platform runs the turn without memory; a turn is never blocked by Engram.")
			add(op, "reply", mapping(
				"address", mapping("description", "The turn_started's payload.reply_to.", "location", "$message.payload#/payload/reply_to"),
				"channel", ref("#/channels/injectionReply"),
				"messages", opMsg("injectionReply", "injectionReply"),
			))
		}
		add(ops, "receive"+strings.ToUpper(id[:1])+id[1:], op)
	}
	for _, c := range channels() {
		if c.address == "" || strings.HasPrefix(c.address, s.DLQ("")) || !strings.Contains(c.address, ".out.") {
			continue
		}
		t := events.Type(strings.Split(c.address, ".")[2])
		add(ops, "send"+strings.ToUpper(c.id[:1])+c.id[1:], mapping(
			"action", "send",
			"channel", ref("#/channels/"+c.id),
			"title", "Engram publishes "+c.title,
			"summary", typeDocs[t],
			"tags", []*yaml.Node{mapping("name", "output")},
			"messages", opMsg(c.id, camel(string(t))),
		))
	}
	add(ops, "receiveContextRequest", mapping(
		"action", "receive",
		"channel", ref("#/channels/contextRequest"),
		"title", "Engram answers context requests",
		"summary", "A platform asks what to send its model of the earlier turns of a session.",
		"messages", opMsg("contextRequest", "contextRequest"),
		"reply", mapping(
			"channel", ref("#/channels/contextReply"),
			"messages", opMsg("contextReply", "contextReply"),
		),
	))
	add(ops, "sendDeadLetter", mapping(
		"action", "send",
		"channel", ref("#/channels/deadLetters"),
		"title", "Engram dead-letters an event",
		"summary", "An event a worker could not process, with the reason.",
		"messages", opMsg("deadLetters", "deadLetter"),
	))
	add(root, "operations", ops)

	comps, err := componentsNode()
	if err != nil {
		return nil, err
	}
	add(root, "components", comps)

	body, err := encodeYAML(root)
	if err != nil {
		return nil, err
	}
	return append([]byte(generatedYAML), body...), nil
}

const generatedYAML = "# Engram's event contract as an AsyncAPI 3 document. Generated from the Go\n" +
	"# types of pkg/events by internal/contract (`engram contract`, or\n" +
	"# `go generate ./internal/contract`): do not edit. api/vectors.json holds the\n" +
	"# test vectors every client runs.\n"

const infoDoc = `Engram is long-term memory for chat agents, as a service that chat platforms talk to over NATS JetStream.
A platform publishes four kinds of events about its conversations (turn_started, turn_ended, session_idle,
tokens_reported); Engram's workers answer with output events (injection_ready, memory_changed,
consolidation_done, compaction_done). This document describes Engram as the application: it receives the input
events and sends the outputs.

Subjects: <prefix>.in.<type>.<tenant>.<project>.<session> (stream ENGRAM_IN),
<prefix>.out.<type>.<tenant>.<project>[.<session>] (stream ENGRAM_OUT),
<prefix>.api.context.<tenant>.<project>.<session> (core NATS request/reply), <prefix>.dlq.<consumer> (stream
ENGRAM_DLQ). The prefix is "engram" unless configured.

Ids become subject tokens (the parameters tenant, project and session): letters, digits and - _ : @ stay as they
are, every other byte of the UTF-8 id is %XX (two upper-case hex digits), and the empty id is "%". So "acme/web"
is "acme%2Fweb", "chat 42" is "chat%2042" and the default tenant (no tenant_id) is "%". Only this canonical form
decodes (no lower-case hex, no escape of a byte that stays as it is). The workers check that the body's type,
tenant_id, project_id and session_id are the subject's, decoded: the subject is what the bus's permissions vouch
for.

Each tenant's platform has credentials of its own that may publish only its own subjects
(<prefix>.in.*.<tenant token>.> and <prefix>.api.context.<tenant token>.>) and receive only on its own reply
inbox: _INBOX.> for the default tenant (the "platform" user), _INBOX_TENANT.<tenant token>.> for a named tenant
(the user "tenant-<tenant token>"). A platform that only reads ENGRAM_OUT uses the "outputs" user.

Delivery is at least once: publish with the event id as Nats-Msg-Id (the stream drops a duplicate within two
minutes); the workers' effects are idempotent. An event a worker cannot process goes to ENGRAM_DLQ with the reason.

api/vectors.json (generated with this document) holds the subject tokens of tricky ids and envelopes that must
decode and that must be refused, with the reason of the Go decoder: every client runs them.`

// paramDocs describe the channel parameters.
var paramDocs = map[string]string{
	"tenant":   "The tenant's id as a subject token: letters, digits and - _ : @ as they are, every other byte %XX (upper-case hex); the default tenant (no tenant_id) is \"%\". Equals the body's tenant_id, decoded.",
	"project":  "The project's id as a subject token (letters, digits and - _ : @ as they are, every other byte %XX, upper-case hex): \"acme/web\" is \"acme%2Fweb\". Equals the body's project_id, decoded.",
	"session":  "The session's id as a subject token (letters, digits and - _ : @ as they are, every other byte %XX, upper-case hex): \"chat 42\" is \"chat%2042\". Equals the body's session_id, decoded.",
	"consumer": "The worker's consumer that gave the event up.",
}

func componentsNode() (*yaml.Node, error) {
	schemas := mapping()
	env, err := envelopeSchema()
	if err != nil {
		return nil, err
	}
	add(schemas, "Envelope", env)
	for _, t := range allTypes() {
		add(schemas, EventSchemaName(t), eventSchema(t))
	}
	for _, t := range components {
		doc := componentDocs[t.Name()]
		st, err := structSchema(t, doc)
		if err != nil {
			return nil, err
		}
		add(schemas, t.Name(), st)
	}
	add(schemas, "EventHeaders", headersSchema())
	add(schemas, "DeadLetterHeaders", dlqHeadersSchema())

	exs, err := exampleEvents()
	if err != nil {
		return nil, err
	}
	var msgs []messageDoc
	for _, t := range allTypes() {
		ex, err := json.Marshal(exs[t])
		if err != nil {
			return nil, err
		}
		md := messageDoc{
			id: camel(string(t)), name: string(t), title: string(t), summary: typeDocs[t],
			contentType: "application/json", headers: "EventHeaders",
			payload: &Schema{Ref: EventSchemaName(t)}, example: ex,
		}
		switch t {
		case events.TypeTurnStarted:
			md.correlation = "eventId"
		case events.TypeInjectionReady:
			md.correlation = "inReplyTo"
		}
		msgs = append(msgs, md)
		if t == events.TypeInjectionReady {
			msgs = append(msgs, messageDoc{
				id: "injectionReply", name: string(t), title: "injection_ready (reply)",
				summary:     "The injection_ready sent to the waiting platform's reply_to: a core NATS message without headers.",
				contentType: "application/json", payload: &Schema{Ref: EventSchemaName(t)}, correlation: "inReplyTo", example: ex,
			})
		}
	}
	ctxReq, _ := json.Marshal(events.ContextRequest{AfterID: 57})
	ctxRep, _ := json.Marshal(events.ContextReply{Version: events.SchemaVersion, Block: "<reference-only preamble, summary, end marker>",
		Summary: "The user is porting the billing service to Go.", UpTo: 41, Tokens: 9120, More: true, LastID: 57,
		Messages: []events.ContextMessage{{ID: 42, TurnID: "t9", Message: events.Message{Role: events.RoleUser, Content: "And the tests?"}}}})
	msgs = append(msgs,
		messageDoc{id: "contextRequest", name: "context_request", title: "context request", contentType: "application/json",
			summary: "Ask for a session's context: {} for the first page, {\"after_id\": last_id} for the next.",
			payload: &Schema{Ref: "ContextRequest"}, example: ctxReq},
		messageDoc{id: "contextReply", name: "context_reply", title: "context reply", contentType: "application/json",
			summary: "A session's context: the summary block (first page) and the stored messages after it, or an error.",
			payload: &Schema{Ref: "ContextReply"}, example: ctxRep},
		messageDoc{id: "deadLetter", name: "dead_letter", title: "dead letter", contentType: "application/octet-stream",
			summary: "The original message's body, byte for byte (or its first bytes when it had to be cut, see Engram-Dlq-Truncated), with the reason and the origin in the headers.",
			headers: "DeadLetterHeaders", payload: &Schema{Type: "string", Format: "binary", Description: "The original body."}},
	)
	messages := mapping()
	for _, md := range msgs {
		m := mapping("name", md.name, "title", md.title, "summary", md.summary, "contentType", md.contentType)
		if md.headers != "" {
			add(m, "headers", ref("#/components/schemas/"+md.headers))
		}
		add(m, "payload", md.payload)
		if md.correlation != "" {
			add(m, "correlationId", ref("#/components/correlationIds/"+md.correlation))
		}
		if md.example != nil {
			ex, err := jsonNode(md.example)
			if err != nil {
				return nil, err
			}
			add(m, "examples", []*yaml.Node{mapping("name", md.id, "payload", ex)})
		}
		add(messages, md.id, m)
	}

	params := mapping()
	for _, p := range []string{"tenant", "project", "session"} {
		add(params, p, mapping("description", paramDocs[p], "examples", []string{examplesOf(p)[0], examplesOf(p)[1]}))
	}
	add(params, "consumer", mapping("description", paramDocs["consumer"],
		"enum", []string{events.ConsumerInjector, events.ConsumerExtractor, events.ConsumerConsolidator, events.ConsumerCompactor, natsauth.RoleIdle}))

	return mapping(
		"schemas", schemas,
		"messages", messages,
		"parameters", params,
		"correlationIds", mapping(
			"eventId", mapping("description", "The turn_started's id: the injection_ready that answers it names it in payload.in_reply_to.", "location", "$message.payload#/id"),
			"inReplyTo", mapping("description", "The id of the turn_started this answers.", "location", "$message.payload#/payload/in_reply_to"),
		),
		"securitySchemes", mapping(
			"userPassword", mapping("type", "userPassword", "description", "A NATS user and password: one user per role (platform: the default tenant's platform; tenant-<tenant token>: a named tenant's platform, `engram tenant add`; outputs: reads ENGRAM_OUT and nothing else; admin, setup and one per worker). `engram serve` generates the roles' passwords into <data dir>/nats-credentials.json (mode 0600)."),
			"token", mapping("type", "apiKey", "in", "password", "description", "A NATS token (sent as the CONNECT auth_token), when the server is configured with one."),
			"creds", mapping("type", "asymmetricEncryption", "description", "A NATS .creds file (a user JWT and its nkey seed) of a decentralised-auth deployment."),
			"clientCertificate", mapping("type", "X509", "description", "TLS with the server's CA and, for mutual TLS, a client certificate and key; combinable with the others."),
		),
	), nil
}

// componentDocs describe the component schemas of Go types.
var componentDocs = map[string]string{
	"TurnStarted":       "Payload of turn_started.",
	"TurnEnded":         "Payload of turn_ended.",
	"Message":           "One message of a turn.",
	"ToolCall":          "A tool call an assistant message made.",
	"SessionIdle":       "Payload of session_idle.",
	"TokensReported":    "Payload of tokens_reported.",
	"InjectionReady":    "Payload of injection_ready.",
	"MemoryChanged":     "Payload of memory_changed.",
	"Change":            "One memory that changed.",
	"ConsolidationDone": "Payload of consolidation_done.",
	"CompactionDone":    "Payload of compaction_done.",
	"ContextRequest":    "Body of a context request (the tenant, project and session are in the subject). An empty body is the first page.",
	"ContextReply":      "Body of a context reply.",
	"ContextMessage":    "A stored transcript message: a Message with its store id and turn id.",
}

func headersSchema() *Schema {
	return &Schema{Type: "object", Description: "Headers of a published event.", Required: []string{events.HeaderMsgID},
		Properties: []Prop{
			{events.HeaderMsgID, &Schema{Type: "string", Description: "The event id (JetStream's de-duplication header)."}},
			{events.HeaderType, &Schema{Type: "string", Description: "The event type, for tools that do not decode bodies.", Enum: typeNames()}},
			{events.HeaderVersion, &Schema{Type: "string", Description: "The schema version, in decimal.", Const: strconv.Itoa(events.SchemaVersion)}},
		}}
}

func dlqHeadersSchema() *Schema {
	str := func(doc string) *Schema { return &Schema{Type: "string", Description: doc} }
	return &Schema{Type: "object", Description: "Headers of a dead letter.",
		Required: []string{events.HeaderDLQReason, events.HeaderDLQConsumer, events.HeaderDLQSubject},
		Properties: []Prop{
			{events.HeaderDLQReason, str("Why it was dead-lettered (the decoder's or the worker's error).")},
			{events.HeaderDLQConsumer, str("The consumer that gave up.")},
			{events.HeaderDLQSubject, str("The original subject.")},
			{events.HeaderDLQStream, str("The original stream.")},
			{events.HeaderDLQSequence, str("The original stream sequence (decimal).")},
			{events.HeaderDLQDeliveries, str("Deliveries made (decimal).")},
			{events.HeaderDLQMsgID, str("The original Nats-Msg-Id (the event id).")},
			{events.HeaderDLQTime, str("When (RFC 3339, UTC).")},
			{events.HeaderDLQTruncated, str("Set when the body had to be cut to fit the server's maximum payload: the original body's size in bytes.")},
		}}
}
