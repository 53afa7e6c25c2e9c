package natsauth

import (
	"slices"

	"github.com/engram-memory/engram/internal/idle"
	"github.com/engram-memory/engram/pkg/events"
)

// Role names: one NATS user per role. The worker roles are also the names
// of their durable consumers on ENGRAM_IN.
const (
	RoleAdmin        = "admin"    // everything: engram serve's own connection, the CLI
	RoleSetup        = "setup"    // creates and updates streams, consumers and the activity bucket (engram setup)
	RolePlatform     = "platform" // a chat platform: publishes input events, receives its replies
	RoleInjector     = events.ConsumerInjector
	RoleExtractor    = events.ConsumerExtractor
	RoleConsolidator = events.ConsumerConsolidator
	RoleCompactor    = events.ConsumerCompactor
	RoleIdle         = idle.ConsumerName // the idle detector
)

// Roles lists every role, admin first.
func Roles() []string {
	return []string{RoleAdmin, RoleSetup, RolePlatform, RoleInjector, RoleExtractor, RoleConsolidator, RoleCompactor, RoleIdle}
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

// InboxPrefix is the reply-inbox prefix of an Engram worker process of
// role (nats.CustomInboxPrefix). Worker processes do not use the shared
// _INBOX. prefix: a platform may subscribe to _INBOX.> for its own replies,
// and must not see the JetStream traffic of the workers, which carries every
// event they pull.
func InboxPrefix(role string) string { return "_INBOX_ENGRAM." + role }

// PlatformInbox is what platforms, the CLI and the setup role receive
// replies on.
const PlatformInbox = "_INBOX.>"

// UserInfoSubject is the server's "who am I" request, which Verify uses to
// read the connection's own permissions. Every role may send it.
const UserInfoSubject = "$SYS.REQ.USER.INFO"

const jsAPI = "$JS.API."

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
	// consumer (info, pull, acks), dead letters (its DLQ subject; the
	// max-deliveries advisory and the message it names), and verifying
	// its permissions at start.
	worker := func(consumer string) *Permissions {
		p := &Permissions{
			Publish: []string{UserInfoSubject, jsAPI + "INFO"},
			Subscribe: []string{InboxPrefix(consumer) + ".>",
				"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + in + "." + consumer},
		}
		for _, s := range streams {
			p.Publish = append(p.Publish, jsAPI+"STREAM.INFO."+s, jsAPI+"CONSUMER.LIST."+s)
		}
		p.Publish = append(p.Publish,
			jsAPI+"CONSUMER.INFO."+in+"."+consumer,
			jsAPI+"CONSUMER.MSG.NEXT."+in+"."+consumer,
			"$JS.ACK."+in+"."+consumer+".>",
			jsAPI+"STREAM.MSG.GET."+in,
			prefix+".dlq."+consumer,
		)
		return p
	}
	out_ := func(t events.Type) string { return prefix + ".out." + string(t) + ".>" }
	switch role {
	case RoleAdmin:
		return nil, true
	case RoleSetup:
		p := &Permissions{Publish: []string{UserInfoSubject, jsAPI + "INFO"}, Subscribe: []string{PlatformInbox}}
		for _, s := range append(streams, kv) {
			p.Publish = append(p.Publish, jsAPI+"STREAM.INFO."+s, jsAPI+"STREAM.CREATE."+s, jsAPI+"STREAM.UPDATE."+s)
		}
		for _, s := range streams {
			p.Publish = append(p.Publish, jsAPI+"CONSUMER.LIST."+s)
		}
		p.Publish = append(p.Publish,
			jsAPI+"CONSUMER.CREATE."+in+".>",
			jsAPI+"CONSUMER.DURABLE.CREATE."+in+".*",
			jsAPI+"CONSUMER.INFO."+in+".*",
		)
		return p, true
	case RolePlatform:
		return &Permissions{
			Publish:   []string{prefix + ".in.>", prefix + ".api.context.>"},
			Subscribe: []string{PlatformInbox},
		}, true
	case RoleInjector:
		p := worker(role)
		// The reply to the platform waiting on its inbox (reply_to).
		p.Publish = append(p.Publish, out_(events.TypeInjectionReady), PlatformInbox)
		return p, true
	case RoleExtractor:
		p := worker(role)
		p.Publish = append(p.Publish, out_(events.TypeMemoryChanged))
		// The transcript consumer, which the extractor role runs too
		// (events.ConsumerTranscript): the same as for its own.
		tc := events.ConsumerTranscript
		p.Publish = append(p.Publish, jsAPI+"CONSUMER.INFO."+in+"."+tc, jsAPI+"CONSUMER.MSG.NEXT."+in+"."+tc,
			"$JS.ACK."+in+"."+tc+".>", prefix+".dlq."+tc)
		p.Subscribe = append(p.Subscribe, "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."+in+"."+tc)
		return p, true
	case RoleConsolidator:
		p := worker(role)
		// The last turn_started of a session (is it still quiet?), and
		// whether the extractor has extracted its last turn
		// (events.ExtractorLag: the session's last turn_ended and the
		// extractor's ack floor).
		p.Publish = append(p.Publish, out_(events.TypeConsolidationDone), out_(events.TypeMemoryChanged),
			jsAPI+"DIRECT.GET."+in, jsAPI+"DIRECT.GET."+in+".>", jsAPI+"CONSUMER.INFO."+in+"."+RoleExtractor)
		return p, true
	case RoleCompactor:
		p := worker(role)
		p.Publish = append(p.Publish, out_(events.TypeCompactionDone),
			// Whether the session's last turn is stored (the transcript
			// consumer's ack floor, events.NewTranscriptLag).
			jsAPI+"DIRECT.GET."+in, jsAPI+"DIRECT.GET."+in+".>", jsAPI+"CONSUMER.INFO."+in+"."+events.ConsumerTranscript)
		// The context API: requests from platforms, answered on their
		// reply subject only.
		p.Subscribe = append(p.Subscribe, prefix+".api.context.*.*")
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
