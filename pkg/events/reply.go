package events

import (
	"fmt"
	"strings"
)

// DefaultReplyPrefix is where replies may go unless configured otherwise:
// the inboxes nats.go makes (nats.Conn.NewInbox, Request, Client.Inject).
const DefaultReplyPrefix = "_INBOX."

// Reply-inbox roots that Engram reserves: a configured reply prefix may not
// overlap them (ValidateReplyPrefix), so that no reply of the default
// tenant lands where another tenant or an Engram process listens.
const (
	// TenantInboxRoot is the first token of every named tenant's reply
	// inbox (TenantInbox).
	TenantInboxRoot = "_INBOX_TENANT"
	// EngramInboxRoot is the first token of the inboxes of Engram's own
	// processes (workers, engram serve, the CLI as admin): the JetStream
	// traffic on them carries every event they read.
	EngramInboxRoot = "_INBOX_ENGRAM"
)

// TenantInbox is the reply-inbox prefix of a tenant (nats.CustomInboxPrefix
// of its platform's connection): "_INBOX" for the default tenant (as
// nats.go's own), "_INBOX_TENANT.<tenant token>" for any other. A tenant's
// platform credentials may subscribe under their own inbox only, and the
// injector and the context service answer a tenant's request only there
// (CheckReplyFor), so no tenant receives another's replies.
func TenantInbox(tenant string) string {
	if tenant == "" {
		return "_INBOX"
	}
	return TenantInboxRoot + "." + EncodeToken(tenant)
}

// ValidateReplyPrefix checks a configured reply prefix: one or more subject
// tokens (a trailing dot is optional) without wildcards, not a system
// subject ($JS, $KV, $SYS...: anything starting with '$') and not under
// the Engram subject prefix engramPrefix ("" means DefaultPrefix), so that
// no configuration can let a reply land in a stream, a key-value bucket or
// the JetStream API.
func ValidateReplyPrefix(prefix, engramPrefix string) error {
	p := strings.TrimSuffix(prefix, ".")
	if !validSubject(p) {
		return fmt.Errorf("%w: reply prefix %q: want dot-separated tokens without spaces or wildcards", ErrInvalidSubject, prefix)
	}
	if strings.HasPrefix(p, "$") {
		return fmt.Errorf("%w: reply prefix %q: system subjects ($...) are not reply subjects", ErrInvalidSubject, prefix)
	}
	ep := engramPrefix
	if ep == "" {
		ep = DefaultPrefix
	}
	if underPrefix(p+".x", ep) || underPrefix(ep+".x", p) {
		return fmt.Errorf("%w: reply prefix %q overlaps the Engram subjects %s.>", ErrInvalidSubject, prefix, ep)
	}
	for _, root := range []string{TenantInboxRoot, EngramInboxRoot} {
		if underPrefix(p+".x", root) || underPrefix(root+".x", p) {
			return fmt.Errorf("%w: reply prefix %q overlaps the reserved inboxes %s.> (other tenants' and Engram's own)", ErrInvalidSubject, prefix, root)
		}
	}
	return nil
}

// underPrefix reports whether subject has the tokens of prefix (no
// trailing dot) as its first tokens, and at least one more.
func underPrefix(subject, prefix string) bool {
	prefix = strings.TrimSuffix(prefix, ".")
	return len(subject) > len(prefix)+1 && strings.HasPrefix(subject, prefix) && subject[len(prefix)] == '.'
}

// CheckReplySubject reports whether subject may be answered: a valid
// subject (no wildcards) with at least one token under one of prefixes
// (empty: DefaultReplyPrefix alone). A turn_started whose reply_to fails it
// is a permanent error: the injector would otherwise publish, with its own
// permissions, on any subject the event names (another project's events,
// the idle detector's key-value bucket, the JetStream API). The error is a
// *FieldError (payload.reply_to) wrapping ErrInvalidEvent.
func CheckReplySubject(subject string, prefixes []string) error {
	if !validSubject(subject) {
		return &FieldError{Field: "payload.reply_to", Reason: fmt.Sprintf("%q is not a valid subject", subject)}
	}
	if len(prefixes) == 0 {
		prefixes = []string{DefaultReplyPrefix}
	}
	for _, p := range prefixes {
		if underPrefix(subject, p) {
			return nil
		}
	}
	return &FieldError{Field: "payload.reply_to", Reason: fmt.Sprintf("%q is not an inbox: replies go only to subjects under %s",
		subject, strings.Join(prefixes, ", "))}
}

// CheckReplyFor reports whether subject may receive an answer to a request
// of tenant: for the default tenant, CheckReplySubject with prefixes (the
// configured reply prefixes); for any other, a subject under
// TenantInbox(tenant) and nowhere else, whatever is configured. The tenant
// is the one the subject of the request vouches for (Subjects.Check), so a
// platform cannot direct an answer into another tenant's inbox. The error
// is a *FieldError (payload.reply_to) wrapping ErrInvalidEvent.
func CheckReplyFor(tenant, subject string, prefixes []string) error {
	if tenant == "" {
		if err := CheckReplySubject(subject, prefixes); err != nil {
			return err
		}
		if underPrefix(subject, TenantInboxRoot) || underPrefix(subject, EngramInboxRoot) {
			return &FieldError{Field: "payload.reply_to", Reason: fmt.Sprintf("%q is a reserved inbox (another tenant's or Engram's)", subject)}
		}
		return nil
	}
	if !validSubject(subject) {
		return &FieldError{Field: "payload.reply_to", Reason: fmt.Sprintf("%q is not a valid subject", subject)}
	}
	if in := TenantInbox(tenant); !underPrefix(subject, in) {
		return &FieldError{Field: "payload.reply_to", Reason: fmt.Sprintf("%q is not an inbox of tenant %q: its replies go only to subjects under %s.", subject, tenant, in)}
	}
	return nil
}

// WithReplyPrefixes sets where Respond and the context service may answer
// (default DefaultReplyPrefix). A platform whose connection uses
// nats.CustomInboxPrefix needs its prefix here, on the workers' side.
func WithReplyPrefixes(prefixes ...string) ClientOption {
	return func(c *Client) { c.replyPrefixes = append([]string(nil), prefixes...) }
}
