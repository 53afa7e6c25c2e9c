package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/engram-memory/engram/internal/credurl"
	"github.com/engram-memory/engram/pkg/events"
)

// securitySettings are the settings of issue 23's smaller hardening items:
// where replies may go, whether metrics carry project ids, and Redis TLS.
func (c *Config) securitySettings() []Setting {
	return []Setting{
		{Flag: "reply-prefixes", Env: "ENGRAM_REPLY_PREFIXES", Group: Conn, value: (*listV)(&c.Events.ReplyPrefixes),
			Usage: "subject prefixes a turn_started's reply_to may name, comma-separated (a platform with a custom inbox prefix adds it); anything else is dead-lettered"},
		{Flag: "metrics-project-labels", Env: "ENGRAM_METRICS_PROJECT_LABELS", Group: Runtime, value: (*boolV)(&c.HTTP.MetricsProjectLabels),
			Usage: "label the model metrics with project ids (at most 100 projects, the rest as _other); off: /metrics names no project"},
		{Flag: "redis-ca", Env: "ENGRAM_REDIS_CA", Group: Runtime, value: (*strV)(&c.Store.RedisCA),
			Usage: "PEM file of the CA(s) that sign the Redis server's certificate (with rediss:// URLs; empty: the system roots)"},
		{Flag: "redis-cert", Env: "ENGRAM_REDIS_CERT", Group: Runtime, value: (*strV)(&c.Store.RedisCert),
			Usage: "PEM client certificate for Redis TLS (with -redis-key; rediss:// URLs)"},
		{Flag: "redis-key", Env: "ENGRAM_REDIS_KEY", Group: Runtime, value: (*strV)(&c.Store.RedisKey),
			Usage: "PEM private key of -redis-cert (mode 600)"},
	}
}

// validateSecurity adds the problems of the security settings.
func (c Config) validateSecurity(bad func(format string, a ...any)) {
	if len(c.Events.ReplyPrefixes) == 0 {
		bad("reply prefixes (ENGRAM_REPLY_PREFIXES) are empty: want at least one, e.g. %s", events.DefaultReplyPrefix)
	}
	for _, p := range c.Events.ReplyPrefixes {
		if err := events.ValidateReplyPrefix(p, c.Events.SubjectPrefix); err != nil {
			bad("reply prefixes (ENGRAM_REPLY_PREFIXES): %v", err)
		}
	}
	if c.Store.Kind != StoreRedis {
		return
	}
	s := c.Store
	if s.RedisCA != "" || s.RedisCert != "" || s.RedisKey != "" {
		for _, u := range strings.Split(s.RedisURL, ",") {
			if u = strings.TrimSpace(u); u != "" && !strings.HasPrefix(u, "rediss://") {
				bad("Redis TLS files (ENGRAM_REDIS_CA, ENGRAM_REDIS_CERT, ENGRAM_REDIS_KEY) are set but ENGRAM_REDIS_URL %q is not rediss://: TLS would not be used", credurl.Redact(u))
			}
		}
	}
	if _, err := s.RedisTLS(); err != nil {
		bad("%v", err)
	}
}

// RedisTLS is the TLS configuration that ENGRAM_REDIS_CA, ENGRAM_REDIS_CERT
// and ENGRAM_REDIS_KEY describe, nil when none is set (a rediss:// URL then
// uses go-redis's default: the system roots, the URL's host as server
// name). The files are read and parsed here, so that a bad file is an error
// at start.
func (s Store) RedisTLS() (*tls.Config, error) {
	if s.RedisCA == "" && s.RedisCert == "" && s.RedisKey == "" {
		return nil, nil
	}
	var errs []error
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.RedisCA != "" {
		pem, err := os.ReadFile(s.RedisCA)
		if err != nil {
			errs = append(errs, fmt.Errorf("Redis CA (ENGRAM_REDIS_CA): %w", err))
		} else {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				errs = append(errs, fmt.Errorf("Redis CA (ENGRAM_REDIS_CA) %s: no PEM certificate in it", s.RedisCA))
			}
			cfg.RootCAs = pool
		}
	}
	switch {
	case s.RedisCert != "" && s.RedisKey != "":
		cert, err := tls.LoadX509KeyPair(s.RedisCert, s.RedisKey)
		if err != nil {
			errs = append(errs, fmt.Errorf("Redis client certificate (ENGRAM_REDIS_CERT, ENGRAM_REDIS_KEY): %w", err))
		} else {
			cfg.Certificates = []tls.Certificate{cert}
		}
	case s.RedisCert != "":
		errs = append(errs, errors.New("Redis client certificate (ENGRAM_REDIS_CERT) needs its key (ENGRAM_REDIS_KEY)"))
	case s.RedisKey != "":
		errs = append(errs, errors.New("Redis client key (ENGRAM_REDIS_KEY) needs its certificate (ENGRAM_REDIS_CERT)"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}
