package natsauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// ErrDenied is wrapped by Verify's error when the connection lacks a
// permission the process needs.
var ErrDenied = errors.New("natsauth: permission denied")

// ErrCannotVerify is wrapped when the server does not answer the
// user-info request (a server older than 2.10, or the request itself
// denied).
var ErrCannotVerify = errors.New("natsauth: cannot read the connection's permissions")

// Granted is the permissions a server reports for a connection.
type Granted struct {
	User, Account string
	// Publish and Subscribe are nil when unrestricted.
	Publish, Subscribe *server.SubjectPermission
}

// Query asks the server for the connection's own user and permissions
// ($SYS.REQ.USER.INFO).
func Query(ctx context.Context, nc *nats.Conn) (Granted, error) {
	var g Granted
	msg, err := nc.RequestWithContext(ctx, UserInfoSubject, nil)
	if err != nil {
		return g, fmt.Errorf("%w: %s: %w", ErrCannotVerify, UserInfoSubject, err)
	}
	var resp struct {
		Data  *server.UserInfo `json:"data"`
		Error *server.ApiError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return g, fmt.Errorf("%w: %s: %w", ErrCannotVerify, UserInfoSubject, err)
	}
	if resp.Error != nil || resp.Data == nil {
		return g, fmt.Errorf("%w: %s: %v", ErrCannotVerify, UserInfoSubject, resp.Error)
	}
	g.User, g.Account = resp.Data.UserID, resp.Data.Account
	if p := resp.Data.Permissions; p != nil {
		g.Publish, g.Subscribe = p.Publish, p.Subscribe
	}
	return g, nil
}

// MayPublish reports whether every subject subject stands for may be
// published to.
func (g Granted) MayPublish(subject string) bool { return allows(g.Publish, subject) }

// MaySubscribe reports whether subject may be subscribed to.
func (g Granted) MaySubscribe(subject string) bool { return allows(g.Subscribe, subject) }

// allows: no permission set, or an allow list that covers subject and no
// deny entry that overlaps it. A subject with wildcards stands for every
// subject it matches.
func allows(p *server.SubjectPermission, subject string) bool {
	if p == nil {
		return true
	}
	if len(p.Allow) > 0 && !slices.ContainsFunc(p.Allow, func(a string) bool { return server.SubjectMatchesFilter(subject, a) }) {
		return false
	}
	return !slices.ContainsFunc(p.Deny, func(d string) bool { return server.SubjectsCollide(subject, d) })
}

// Need is what a process needs of the bus: the permissions of the roles it
// runs, with its own reply inbox.
type Need struct {
	Roles []string
	// Inbox is the process's inbox prefix (InboxPrefix(role) or "_INBOX").
	Inbox  string
	Prefix string
}

// Missing lists what g lacks of n, as "publish <subject> (role)" and
// "subscribe <subject> (role)".
func (g Granted) Missing(n Need) []string {
	var miss []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			miss = append(miss, s)
		}
	}
	inbox := n.Inbox
	if inbox == "" {
		inbox = "_INBOX"
	}
	if !g.MaySubscribe(inbox + ".>") {
		add("subscribe " + inbox + ".> (replies)")
	}
	for _, r := range n.Roles {
		p, ok := For(r, n.Prefix)
		if !ok || p == nil {
			continue
		}
		for _, s := range p.Publish {
			if !g.MayPublish(s) {
				add("publish " + s + " (" + r + ")")
			}
		}
		for _, s := range p.Subscribe {
			if strings.HasPrefix(s, "_INBOX") {
				continue // the process's own inbox is checked above
			}
			if !g.MaySubscribe(s) {
				add("subscribe " + s + " (" + r + ")")
			}
		}
	}
	return miss
}

// Verify checks at start that the connection may do everything the roles
// of n need, and returns an error naming every missing subject (wrapping
// ErrDenied). The server's permission violations arrive later and
// asynchronously, so without this a worker denied a subject would start,
// look healthy and never work.
func Verify(ctx context.Context, nc *nats.Conn, n Need) (Granted, error) {
	// The reply of the user-info request needs the inbox: check it first,
	// synchronously, or a denied inbox would look like a silent server.
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return Granted{}, fmt.Errorf("natsauth: subscribe %s: %w", inbox, err)
	}
	err = nc.Flush()
	_ = sub.Unsubscribe()
	if err == nil {
		if last := nc.LastError(); errors.Is(last, nats.ErrPermissionViolation) && strings.Contains(last.Error(), inbox) {
			err = last
		}
	}
	if err != nil {
		prefix := strings.TrimSuffix(inbox, "."+inbox[strings.LastIndexByte(inbox, '.')+1:])
		return Granted{}, fmt.Errorf("%w: may not subscribe %s.> (the connection's reply inbox; see deploy/nats/accounts.conf): %w",
			ErrDenied, prefix, err)
	}
	g, err := Query(ctx, nc)
	if err != nil {
		return g, err
	}
	if miss := g.Missing(n); len(miss) > 0 {
		return g, fmt.Errorf("%w: NATS user %q (account %s) may not:\n  %s\n(see deploy/nats/accounts.conf for each role's permissions)",
			ErrDenied, g.User, g.Account, strings.Join(miss, "\n  "))
	}
	return g, nil
}
