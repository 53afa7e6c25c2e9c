package natsauth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Client is how a client authenticates to NATS and which TLS it uses. At
// most one of user/password, token, nkey seed and creds file is given.
type Client struct {
	User, Password string
	Token          string
	// NKeyFile is a file holding an nkey seed (SU...).
	NKeyFile string
	// CredsFile is a .creds file (user JWT and nkey seed).
	CredsFile string
	// CAFile is a PEM file of the CAs that sign the server's certificate;
	// CertFile and KeyFile are the client's certificate and key (mutual
	// TLS). Any of them turns TLS on.
	CAFile, CertFile, KeyFile string
}

// HasAuth reports whether any authentication is set.
func (c Client) HasAuth() bool {
	return c.User != "" || c.Password != "" || c.Token != "" || c.NKeyFile != "" || c.CredsFile != ""
}

// Method names the authentication in use, for logs: "user <name>",
// "token", "nkey", "creds" or "none". It never includes a secret.
func (c Client) Method() string {
	switch {
	case c.CredsFile != "":
		return "creds"
	case c.NKeyFile != "":
		return "nkey"
	case c.Token != "":
		return "token"
	case c.User != "":
		return "user " + c.User
	}
	return "none"
}

// Validate returns every problem of c: more than one authentication, a
// user without a password or the reverse, a certificate without its key,
// unreadable or malformed files. Secrets are never quoted.
func (c Client) Validate() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	var methods []string
	if c.User != "" || c.Password != "" {
		methods = append(methods, "user/password (ENGRAM_NATS_USER, ENGRAM_NATS_PASSWORD)")
		if c.User == "" {
			bad("NATS password (ENGRAM_NATS_PASSWORD) given without a user (ENGRAM_NATS_USER)")
		}
		if c.Password == "" {
			bad("NATS user (ENGRAM_NATS_USER) %q given without a password (ENGRAM_NATS_PASSWORD)", c.User)
		}
	}
	if c.Token != "" {
		methods = append(methods, "token (ENGRAM_NATS_TOKEN)")
	}
	if c.NKeyFile != "" {
		methods = append(methods, "nkey seed (ENGRAM_NATS_NKEY)")
		if data, err := os.ReadFile(c.NKeyFile); err != nil {
			bad("NATS nkey seed file (ENGRAM_NATS_NKEY): %v", err)
		} else if _, err := nkeys.ParseDecoratedNKey(data); err != nil {
			bad("NATS nkey seed file (ENGRAM_NATS_NKEY) %s: no nkey seed in it", c.NKeyFile)
		}
	}
	if c.CredsFile != "" {
		methods = append(methods, "creds file (ENGRAM_NATS_CREDS)")
		if data, err := os.ReadFile(c.CredsFile); err != nil {
			bad("NATS creds file (ENGRAM_NATS_CREDS): %v", err)
		} else if !strings.Contains(string(data), "-----BEGIN NATS USER JWT-----") {
			bad("NATS creds file (ENGRAM_NATS_CREDS) %s: no user JWT in it (want a .creds file from nsc)", c.CredsFile)
		}
	}
	if len(methods) > 1 {
		bad("NATS authentication: give only one of %s", strings.Join(methods, ", "))
	}
	if c.CAFile != "" {
		if data, err := os.ReadFile(c.CAFile); err != nil {
			bad("NATS CA file (ENGRAM_NATS_CA): %v", err)
		} else if !x509.NewCertPool().AppendCertsFromPEM(data) {
			bad("NATS CA file (ENGRAM_NATS_CA) %s: no PEM certificate in it", c.CAFile)
		}
	}
	switch {
	case c.CertFile != "" && c.KeyFile == "":
		bad("NATS client certificate (ENGRAM_NATS_CERT) given without its key (ENGRAM_NATS_KEY)")
	case c.CertFile == "" && c.KeyFile != "":
		bad("NATS client key (ENGRAM_NATS_KEY) given without its certificate (ENGRAM_NATS_CERT)")
	case c.CertFile != "":
		if _, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile); err != nil {
			bad("NATS client certificate and key (ENGRAM_NATS_CERT, ENGRAM_NATS_KEY): %v", err)
		}
	}
	return errs
}

// Options are the nats.go options of c.
func (c Client) Options() ([]nats.Option, error) {
	if errs := c.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var o []nats.Option
	switch {
	case c.User != "":
		o = append(o, nats.UserInfo(c.User, c.Password))
	case c.Token != "":
		o = append(o, nats.Token(c.Token))
	case c.NKeyFile != "":
		opt, err := nats.NkeyOptionFromSeed(c.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("natsauth: nkey seed %s: %w", c.NKeyFile, err)
		}
		o = append(o, opt)
	case c.CredsFile != "":
		o = append(o, nats.UserCredentials(c.CredsFile))
	}
	if c.CAFile != "" {
		o = append(o, nats.RootCAs(c.CAFile))
	}
	if c.CertFile != "" {
		o = append(o, nats.ClientCert(c.CertFile, c.KeyFile))
	}
	return o, nil
}

// IsLocal reports whether every server of a comma-separated NATS URL list
// is on this machine (a loopback address or localhost); an empty list is
// local (the default local `engram serve`). Credentials of the data dir are
// sent only to local servers.
func IsLocal(urls string) bool {
	if strings.TrimSpace(urls) == "" {
		return true
	}
	for _, raw := range strings.Split(urls, ",") {
		raw = strings.TrimSpace(raw)
		if _, rest, ok := strings.Cut(raw, "://"); ok {
			raw = rest
		}
		if i := strings.LastIndexByte(raw, '@'); i >= 0 {
			raw = raw[i+1:]
		}
		if i := strings.IndexAny(raw, "/?"); i >= 0 {
			raw = raw[:i]
		}
		h := raw
		if host, _, err := net.SplitHostPort(raw); err == nil {
			h = host
		}
		h = strings.Trim(h, "[]")
		if h == "localhost" {
			continue
		}
		ip := net.ParseIP(h)
		if ip == nil || !ip.IsLoopback() {
			return false
		}
	}
	return true
}

// URLHasAuth reports whether a NATS URL list carries credentials itself
// (nats://user:pass@host or nats://token@host).
func URLHasAuth(urls string) bool {
	for _, raw := range strings.Split(urls, ",") {
		if u, err := url.Parse(strings.TrimSpace(raw)); err == nil && u.User != nil {
			return true
		}
	}
	return false
}
