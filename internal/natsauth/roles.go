package natsauth

import (
	"slices"
	"strings"

	"github.com/engram-memory/engram/internal/idle"
	"github.com/engram-memory/engram/pkg/events"
)

// Role names: one NATS user per role. The worker roles are also the names
// of their durable consumers on ENGRAM_IN.
const (
	RoleAdmin        = "admin"    // everything: engram serve's own connection, the CLI
	RoleSetup        = "setup"    // creates and updates streams, consumers and the activity bucket (engram setup)
	RolePlatform     = "platform" // a chat platform: publishes input events, receives its replies
	RoleOutputs      = "outputs"  // reads ENGRAM_OUT and nothing else (a platform that reacts to memory_changed)
	RoleInjector     = events.ConsumerInjector
	RoleExtractor    = events.ConsumerExtractor
	RoleConsolidator = events.ConsumerConsolidator
	RoleCompactor    = events.ConsumerCompactor
	RoleIdle         = idle.ConsumerName // the idle detector
)

// Roles lists every role, admin first.
func Roles() []string {
	return []string{RoleAdmin, RoleSetup, RolePlatform, RoleOutputs, RoleInjector, RoleExtractor, RoleConsolidator, RoleCompactor, RoleIdle}
}

// WorkerRoles are the roles of the Engram processes that consume ENGRAM_IN.
func WorkerRoles() []string {
	return []string{RoleInjector, RoleExtractor, RoleConsolidator, RoleCompactor, RoleIdle}
}

// ValidRole reports whether r is a role name.
func ValidRole(r string) bool { return slices.Contains(Roles(), r) }

// Permissions is what one role may publish and subscribe to. Everything
// not listed is denied. A nil *Permissions (admin) is unrestricted.
type Permissions struct {
	Publish   []string
	Subscribe []string
	// Responses lets the user publish one reply to the reply subject of
	// each request it received on a subscription (core NATS
	// request/reply: the compactor's context API).
	Responses bool
}

// InboxPrefix is the reply-inbox prefix of an Engram process of role
// (nats.CustomInboxPrefix): the workers, engram serve ("serve"), the setup
// role and the CLI as admin ("cli"). They do not use the shared _INBOX.
// prefix: the default tenant's platform may subscribe to _INBOX.> for its
// own replies, and must not see the JetStream traffic of Engram's
// processes, which carries every event and dead letter they read.
func InboxPrefix(role string) string { return events.EngramInboxRoot + "." + role }

// ClientInbox is the reply-inbox prefix (nats.CustomInboxPrefix) a client
// connecting as the NATS user user must use, the only one its permissions
// let it subscribe to: a worker role's, the setup role's or the outputs
// role's own (InboxPrefix), a tenant's (events.TenantInbox of
// TenantOfUser); "" (nats.go's _INBOX) for the platform role, admin and
// unknown users.
func ClientInbox(user string) string {
	if t, ok := TenantOfUser(user); ok {
		return events.TenantInbox(t)
	}
	if user == RoleSetup || user == RoleOutputs || slices.Contains(WorkerRoles(), user) {
		return InboxPrefix(user)
	}
	return ""
}

// PlatformInbox is what the default tenant's platform receives replies on.
const PlatformInbox = "_INBOX.>"

// UserInfoSubject is the server's "who am I" request, which Verify uses to
// read the connection's own permissions. Every role may send it.
const UserInfoSubject = "$SYS.REQ.USER.INFO"

const jsAPI = "$JS.API."

// TenantUserPrefix starts the NATS user name of a tenant's platform
// credentials (TenantUser).
const TenantUserPrefix = "tenant-"

// TenantUser is the NATS user name of tenant's platform credentials:
// "tenant-" and the tenant's subject token. The default tenant's platform
// is the platform role.
func TenantUser(tenant string) string { return TenantUserPrefix + events.EncodeToken(tenant) }

// TenantOfUser returns the tenant of a tenant user name (TenantUser), ok
// false for any other name.
func TenantOfUser(user string) (tenant string, ok bool) {
	tok, ok := strings.CutPrefix(user, TenantUserPrefix)
	if !ok {
		return "", false
	}
	t, err := events.DecodeToken(tok)
	if err != nil || t == "" {
		return "", false
	}
	return t, true
}

// ForTenant returns the permissions of a platform of tenant ("" the
// default tenant: the platform role): publish its own input subjects
// (<prefix>.in.*.<tenant>.>) and context requests
// (<prefix>.api.context.<tenant>.>), subscribe its own reply inbox
// (events.TenantInbox). Nothing else: not another tenant's subjects or
// inbox, not ENGRAM_OUT or the DLQ, no JetStream API (no direct get, no
// consumer). JetStream acknowledges its publishes on its inbox.
func ForTenant(tenant, prefix string) *Permissions {
	s := events.Subjects{Prefix: prefix}
	return &Permissions{
		Publish:   []string{s.InTenant(tenant), s.ContextAPITenant(tenant)},
		Subscribe: []string{events.TenantInbox(tenant) + ".>"},
	}
}

// For returns the permissions of role with subject prefix prefix (usually
// events.DefaultPrefix). ok is false for an unknown role; perms is nil for
// admin.
func For(role, prefix string) (perms *Permissions, ok bool) {
	if prefix == "" {
		prefix = events.DefaultPrefix
	}
	in, out, dlq := events.StreamIn, events.StreamOut, events.StreamDLQ
	kv := "KV_" + idle.DefaultBucket
	streams := []string{in, out, dlq}
	// What every worker process does whatever its role: readiness
	// (account info), lag gauges (stream info, consumer lists), its own
	// consumer (info, pull, acks), dead letters (its DLQ subject), and
	// verifying its permissions at start. It reads ENGRAM_IN only through
	// its own consumer: no get of a message by sequence (STREAM.MSG.GET,
	// DIRECT.GET without a subject), which would read any tenant's event.
	worker := func(consumer string) *Permissions {
		p := &Permissions{
			Publish:   []string{UserInfoSubject, jsAPI + "INFO"},
			Subscribe: []string{InboxPrefix(consumer) + ".>"},
		}
		for _, s := range streams {
			p.Publish = append(p.Publish, jsAPI+"STREAM.INFO."+s, jsAPI+"CONSUMER.LIST."+s)
		}
		p.Publish = append(p.Publish,
			jsAPI+"CONSUMER.INFO."+in+"."+consumer,
			jsAPI+"CONSUMER.MSG.NEXT."+in+"."+consumer,
			"$JS.ACK."+in+"."+consumer+".>",
			prefix+".dlq."+consumer,
		)
		return p
	}
	// The last event of a type on a session's subject (a direct get by
	// subject: the server refuses a sequence on this form).
	lastOf := func(t events.Type) string {
		return jsAPI + "DIRECT.GET." + in + "." + prefix + ".in." + string(t) + ".>"
	}
	out_ := func(t events.Type) string { return prefix + ".out." + string(t) + ".>" }
	switch role {
	case RoleAdmin:
		return nil, true
	case RoleSetup:
		// Creates the streams and updates ENGRAM_IN, ENGRAM_OUT and the
		// activity bucket; ENGRAM_DLQ it may create but not update: new
		// limits would let it delete every dead letter (an admin applies
		// a change of the DLQ's limits). Consumers: only the worker roles'
		// durable ones.
		p := &Permissions{Publish: []string{UserInfoSubject, jsAPI + "INFO"}, Subscribe: []string{InboxPrefix(role) + ".>"}}
		for _, s := range append(streams, kv) {
			p.Publish = append(p.Publish, jsAPI+"STREAM.INFO."+s, jsAPI+"STREAM.CREATE."+s)
			if s != dlq {
				p.Publish = append(p.Publish, jsAPI+"STREAM.UPDATE."+s)
			}
		}
		for _, s := range streams {
			p.Publish = append(p.Publish, jsAPI+"CONSUMER.LIST."+s)
		}
		for _, c := range append(WorkerRoles(), events.ConsumerTranscript) {
			p.Publish = append(p.Publish,
				jsAPI+"CONSUMER.CREATE."+in+"."+c,
				jsAPI+"CONSUMER.CREATE."+in+"."+c+".>",
				jsAPI+"CONSUMER.DURABLE.CREATE."+in+"."+c,
				jsAPI+"CONSUMER.INFO."+in+"."+c)
		}
		// The injector's lanes (events.EnsureLanes): created, changed
		// and deleted as tenants come and go.
		for _, c := range events.LaneNames() {
			p.Publish = append(p.Publish,
				jsAPI+"CONSUMER.CREATE."+in+"."+c,
				jsAPI+"CONSUMER.CREATE."+in+"."+c+".>",
				jsAPI+"CONSUMER.INFO."+in+"."+c,
				jsAPI+"CONSUMER.DELETE."+in+"."+c)
		}
		return p, true
	case RolePlatform:
		return ForTenant("", prefix), true
	case RoleOutputs:
		// Reads the output events as they are published (core NATS, a
		// subscription under <prefix>.out.>) and nothing else: it
		// publishes nothing but the who-am-I request and makes no
		// JetStream request, since a consumer it could create would
		// deliver ENGRAM_OUT's messages to any subject it names, which
		// the server does not check against its permissions
		// (nats-io/nats-server#8274), and a pull or direct get answers
		// on any reply subject. It sees every tenant's outputs,
		// injection blocks included: the operator's role, not a
		// tenant's.
		return &Permissions{
			Publish:   []string{UserInfoSubject},
			Subscribe: []string{events.Subjects{Prefix: prefix}.OutAll(), InboxPrefix(role) + ".>"},
		}, true
	case RoleInjector:
		p := worker(role)
		// Its lanes (events.InjectorLanes), read like its own consumer.
		for _, c := range events.LaneNames() {
			p.Publish = append(p.Publish, jsAPI+"CONSUMER.INFO."+in+"."+c, jsAPI+"CONSUMER.MSG.NEXT."+in+"."+c,
				"$JS.ACK."+in+"."+c+".>")
		}
		// The reply to the platform waiting on its inbox (reply_to): the
		// default tenant's and every other tenant's inboxes; the handler
		// answers a tenant only in its own (events.CheckReplyFor).
		p.Publish = append(p.Publish, out_(events.TypeInjectionReady), PlatformInbox, events.TenantInboxRoot+".>")
		return p, true
	case RoleExtractor:
		p := worker(role)
		p.Publish = append(p.Publish, out_(events.TypeMemoryChanged))
		// The transcript consumer, which the extractor role runs too
		// (events.ConsumerTranscript): the same as for its own.
		tc := events.ConsumerTranscript
		p.Publish = append(p.Publish, jsAPI+"CONSUMER.INFO."+in+"."+tc, jsAPI+"CONSUMER.MSG.NEXT."+in+"."+tc,
			"$JS.ACK."+in+"."+tc+".>", prefix+".dlq."+tc)
		return p, true
	case RoleConsolidator:
		p := worker(role)
		// The last turn_started of a session (is it still quiet?), and
		// whether the extractor has extracted its last turn
		// (events.ExtractorLag: the session's last turn_ended and the
		// extractor's ack floor).
		p.Publish = append(p.Publish, out_(events.TypeConsolidationDone), out_(events.TypeMemoryChanged),
			lastOf(events.TypeTurnStarted), lastOf(events.TypeTurnEnded), jsAPI+"CONSUMER.INFO."+in+"."+RoleExtractor)
		return p, true
	case RoleCompactor:
		p := worker(role)
		p.Publish = append(p.Publish, out_(events.TypeCompactionDone),
			// Whether the session's last turn is stored (the transcript
			// consumer's ack floor, events.NewTranscriptLag).
			lastOf(events.TypeTurnEnded), jsAPI+"CONSUMER.INFO."+in+"."+events.ConsumerTranscript)
		// The context API: requests from platforms, answered on their
		// reply subject only (allow_responses: one answer per request,
		// while it is fresh), and only when that is an inbox of the
		// request's tenant (events.CheckReplyFor).
		p.Subscribe = append(p.Subscribe, events.Subjects{Prefix: prefix}.ContextAPIAll())
		p.Responses = true
		return p, true
	case RoleIdle:
		p := worker(role)
		p.Publish = append(p.Publish, prefix+".in."+string(events.TypeSessionIdle)+".>",
			// Its activity bucket: created or updated at start, read,
			// written and watched.
			jsAPI+"STREAM.INFO."+kv, jsAPI+"STREAM.CREATE."+kv, jsAPI+"STREAM.UPDATE."+kv,
			jsAPI+"DIRECT.GET."+kv+".>", jsAPI+"STREAM.MSG.GET."+kv,
			jsAPI+"CONSUMER.CREATE."+kv+".>", jsAPI+"CONSUMER.DELETE."+kv+".>", jsAPI+"CONSUMER.INFO."+kv+".>",
			// The legacy ephemeral create (no name in the subject): nats.go
			// re-creates a watcher's ordered consumer there after a
			// reconnect, while not connected (no server version known).
			jsAPI+"CONSUMER.CREATE."+kv,
			"$JS.FC."+kv+".>", "$JS.ACK."+kv+".>",
			"$KV."+idle.DefaultBucket+".>")
		return p, true
	}
	return nil, false
}
