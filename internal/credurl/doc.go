// Package credurl keeps credentials of URLs out of logs, errors and status
// output: Redact masks the user information of every URL in a text
// (nats://admin:secret@host -> nats://admin:xxxxx@host), Error does the
// same to an error's message, and Core wraps a zap core so that every log
// line of the process passes through Redact.
//
// Why a text scan rather than net/url's URL.Redacted: the URLs that leak
// are rarely alone. ENGRAM_NATS_URL is a comma-separated list; ENGRAM_REDIS_URL
// may be a cluster list of bare host:port and URLs; and libraries repeat the
// URL inside their errors (net/url's "parse \"redis://:pw@h:x\": invalid
// port", go-redis's parse errors, nats.go's connect errors), where only a
// scan of the message finds it. Redact looks for "scheme://" and treats
// everything up to the last '@' before the next whitespace, quote, angle
// bracket or next "scheme://" as user information, so a password holding
// '/', '?', '#', ',' or '@' is masked whole. The price: an '@' in a URL's
// path or query (http://host/a?mail=x@y) masks the host part too — a log
// line loses a host, never a password. User information without a
// password (nats://token@host, an API token as user name) is masked
// entirely: for NATS it is a token. The values of query parameters whose
// names say they hold a credential (?api_key=, &token=, X-Amz-Signature=:
// SecretParam) are masked too: an Ollama behind a gateway may take its key
// in the query, and every error of a call repeats the URL (the probe of
// 2026-12-06 found one on the unauthenticated /readyz and in the logs).
//
// Core's cost: every string, error, stringer and byte-string field and the
// message of each log entry is searched for "://" (a fast substring
// search); the fields are copied only when a URL with user information is
// in them. BenchmarkCore against BenchmarkPlainCore (a JSON line of three
// fields, no URL): 1.27 against 1.21 µs in the quietest run on the shared
// 2-CPU development machine, within its noise. That is cheap enough to
// wrap every logger of the process rather than trust each call site.
// Arrays (zap.Strings), objects, reflected values and error lists are
// encoded (to JSON) and searched too; that costs an encoding per such
// field, and they are rare in our logs.
package credurl
