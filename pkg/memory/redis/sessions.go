package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

// gcMargin is added to a lease, briefing flag or processed-event record's
// time-to-live for the Redis expiry that only collects garbage: the
// decision whether a record is still in force is always taken against the
// store's clock, never by Redis' own.
const gcMargin = 24 * time.Hour

// Per-session keys, all under the session's project (one slot):
//
//	s:<sid>:m      list of messages (JSON); message id = list index + 1
//	s:<sid>:turns  hash turn id -> "first,last" message ids
//	s:<sid>:sum    list of summaries (JSON), the last is the latest
//	s:<sid>:cur    the consolidation cursor
//	s:<sid>:inj    hash turn id -> injected node ids (JSON)
//	s:<sid>:brief  the briefing flag: its expiry (unix ns, store clock)
//	s:<sid>:l:<n>  lease n: hash o (owner), e (expiry, unix ns)
type sessionKeys struct{ p string }

func (s *Store) sessionKeys(ref memory.SessionRef) (sessionKeys, error) {
	if err := memory.CheckSession(ref); err != nil {
		return sessionKeys{}, err
	}
	return sessionKeys{p: s.keys(space(ref.ProjectRef())).session(ref.Session)}, nil
}

func (k sessionKeys) messages() string         { return k.p + "m" }
func (k sessionKeys) turns() string            { return k.p + "turns" }
func (k sessionKeys) summaries() string        { return k.p + "sum" }
func (k sessionKeys) cursor() string           { return k.p + "cur" }
func (k sessionKeys) injections() string       { return k.p + "inj" }
func (k sessionKeys) brief() string            { return k.p + "brief" }
func (k sessionKeys) lease(name string) string { return k.p + "l:" + name }

func decodeMessages(raw []string) ([]memory.Message, error) {
	out := make([]memory.Message, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal([]byte(r), &out[i]); err != nil {
			return nil, fmt.Errorf("redis: bad message record: %w", err)
		}
	}
	return out, nil
}

// AppendTranscript appends a turn's messages once per turn id.
func (s *Store) AppendTranscript(ctx context.Context, ref memory.SessionRef, turnID string, msgs []memory.Message) ([]memory.Message, bool, error) {
	k, err := s.sessionKeys(ref)
	if err != nil {
		return nil, false, err
	}
	if err := s.hold(ctx, ref.ProjectRef()); err != nil {
		return nil, false, err
	}
	prepared, err := memory.PrepareTranscript(ref.Tenant, turnID, msgs, s.now())
	if err != nil {
		return nil, false, err
	}
	var out []memory.Message
	var fresh bool
	err = s.retryTx(ctx, "append transcript", func(tx *goredis.Tx) error {
		rng, err := tx.HGet(ctx, k.turns(), turnID).Result()
		if err == nil {
			first, last, perr := parseRange(rng)
			if perr != nil {
				return perr
			}
			out, fresh = nil, false
			if last < first {
				return nil
			}
			raw, err := tx.LRange(ctx, k.messages(), first-1, last-1).Result()
			if err != nil {
				return err
			}
			out, err = decodeMessages(raw)
			return err
		}
		if !errors.Is(err, goredis.Nil) {
			return err
		}
		n, err := tx.LLen(ctx, k.messages()).Result()
		if err != nil {
			return err
		}
		stored := make([]memory.Message, len(prepared))
		vals := make([]any, len(prepared))
		for i, m := range prepared {
			m.ID = n + int64(i) + 1
			stored[i] = m
			b, err := json.Marshal(m)
			if err != nil {
				return fmt.Errorf("%w: message %d: %v", memory.ErrInvalid, i, err)
			}
			vals[i] = string(b)
		}
		_, err = tx.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
			if len(vals) > 0 {
				pipe.RPush(ctx, k.messages(), vals...)
			}
			pipe.HSet(ctx, k.turns(), turnID, fmt.Sprintf("%d,%d", n+1, n+int64(len(vals))))
			return nil
		})
		if err == nil {
			out, fresh = stored, true
		}
		return err
	}, k.turns(), k.messages())
	return out, fresh, err
}

func parseRange(s string) (first, last int64, err error) {
	a, b, ok := strings.Cut(s, ",")
	if ok {
		first, err = strconv.ParseInt(a, 10, 64)
		if err == nil {
			last, err = strconv.ParseInt(b, 10, 64)
		}
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("redis: bad turn record %q", s)
	}
	return first, last, nil
}

// Messages lists messages with id > afterID, oldest first; limit <= 0: all.
func (s *Store) Messages(ctx context.Context, ref memory.SessionRef, afterID int64, limit int) ([]memory.Message, error) {
	k, err := s.sessionKeys(ref)
	if err != nil {
		return nil, err
	}
	afterID = max(afterID, 0)
	stop := int64(-1)
	if limit > 0 {
		stop = afterID + int64(limit) - 1
	}
	raw, err := s.c.LRange(ctx, k.messages(), afterID, stop).Result()
	if err != nil {
		return nil, s.wrap("messages", err)
	}
	return decodeMessages(raw)
}

// LatestSummary returns the last saved summary.
func (s *Store) LatestSummary(ctx context.Context, ref memory.SessionRef) (memory.Summary, error) {
	k, err := s.sessionKeys(ref)
	if err != nil {
		return memory.Summary{}, err
	}
	raw, err := s.c.LIndex(ctx, k.summaries(), -1).Result()
	if errors.Is(err, goredis.Nil) {
		return memory.Summary{}, fmt.Errorf("%w: no summary for %s", memory.ErrNotFound, ref)
	}
	if err != nil {
		return memory.Summary{}, s.wrap("latest summary", err)
	}
	var sum memory.Summary
	if err := json.Unmarshal([]byte(raw), &sum); err != nil {
		return memory.Summary{}, fmt.Errorf("redis: bad summary record: %w", err)
	}
	return sum, nil
}

// SaveSummary stores a summary as the latest.
func (s *Store) SaveSummary(ctx context.Context, ref memory.SessionRef, in memory.Summary) error {
	k, err := s.sessionKeys(ref)
	if err != nil {
		return err
	}
	if err := s.hold(ctx, ref.ProjectRef()); err != nil {
		return err
	}
	sum, err := memory.PrepareSummaryOf(ref.Tenant, in, s.now())
	if err != nil {
		return err
	}
	b, err := json.Marshal(sum)
	if err != nil {
		return fmt.Errorf("%w: summary: %v", memory.ErrInvalid, err)
	}
	return s.wrap("save summary", appendOnceScript.Run(ctx, s.c, []string{k.summaries()}, string(b)).Err())
}

// appendOnceScript appends ARGV[1] to the list unless it is already its
// last element: go-redis sends a command again when its reply timed out
// (a failover), and a plain RPUSH whose first send was applied stored the
// summary twice. A summary is stamped when it is prepared, so two saves
// are never the same document.
var appendOnceScript = goredis.NewScript(`
if redis.call('LINDEX', KEYS[1], -1) == ARGV[1] then return 0 end
return redis.call('RPUSH', KEYS[1], ARGV[1])
`)

// Cursor returns the consolidation cursor (0 until advanced).
func (s *Store) Cursor(ctx context.Context, ref memory.SessionRef) (int64, error) {
	k, err := s.sessionKeys(ref)
	if err != nil {
		return 0, err
	}
	v, err := s.c.Get(ctx, k.cursor()).Int64()
	if errors.Is(err, goredis.Nil) {
		return 0, nil
	}
	return v, s.wrap("cursor", err)
}

var advanceScript = goredis.NewScript(`
local c = tonumber(redis.call('GET', KEYS[1]) or '0')
local to = tonumber(ARGV[1])
if to > c then
  redis.call('SET', KEYS[1], ARGV[1])
  return ARGV[1]
end
return tostring(c)
`)

// AdvanceCursor moves the cursor forward only.
func (s *Store) AdvanceCursor(ctx context.Context, ref memory.SessionRef, to int64) (int64, error) {
	k, err := s.sessionKeys(ref)
	if err != nil {
		return 0, err
	}
	if err := s.hold(ctx, ref.ProjectRef()); err != nil {
		return 0, err
	}
	v, err := advanceScript.Run(ctx, s.c, []string{k.cursor()}, strconv.FormatInt(to, 10)).Text()
	if err != nil {
		return 0, s.wrap("advance cursor", err)
	}
	c, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("redis advance cursor: bad cursor %q: %w", v, err)
	}
	return c, nil
}

// SetCursor moves the cursor to `to`, back or forward.
func (s *Store) SetCursor(ctx context.Context, ref memory.SessionRef, to int64) error {
	k, err := s.sessionKeys(ref)
	if err != nil {
		return err
	}
	if to < 0 {
		return fmt.Errorf("%w: cursor %d is negative", memory.ErrInvalid, to)
	}
	if err := s.hold(ctx, ref.ProjectRef()); err != nil {
		return err
	}
	return s.wrap("set cursor", s.c.Set(ctx, k.cursor(), strconv.FormatInt(to, 10), 0).Err())
}

// injectionDoc is the stored form of an injection record: the record and
// its expiry on the store's clock (unix nanoseconds; 0: never), which
// decides; the field's own expiry (HSETEX, gcMargin later) only collects
// it. A record written before records held the block is a JSON array of ids.
type injectionDoc struct {
	memory.Injection
	Expires int64 `json:"exp,omitempty"`
}

// setFieldExpiring sets a hash field that Redis collects gcMargin after
// ttl (ttl <= 0: never), in one command: HSETEX with the field's expiry,
// or HSET, which clears an expiry the field had. A MULTI of HSET and
// HPEXPIRE cost the server about ten times as much (an EXEC that writes
// costs some 25 us more than its commands; the injector writes a record
// every turn).
func setFieldExpiring(ctx context.Context, c goredis.Cmdable, key, field, value string, ttl time.Duration) error {
	if ttl > 0 {
		return c.HSetEXWithArgs(ctx, key, &goredis.HSetEXOptions{
			ExpirationType: goredis.HSetEXExpirationPX, ExpirationVal: (ttl + gcMargin).Milliseconds(),
		}, field, value).Err()
	}
	return c.HSet(ctx, key, field, value).Err()
}

// PutInjection records (replaces) what a turn was answered with, for ttl
// (<= 0: never expires): a field of the session's injection hash, with its
// field expiry, in one command (setFieldExpiring).
func (s *Store) PutInjection(ctx context.Context, ref memory.SessionRef, turnID string, in memory.Injection, ttl time.Duration) error {
	k, err := s.sessionKeys(ref)
	if err != nil {
		return err
	}
	if err := s.hold(ctx, ref.ProjectRef()); err != nil {
		return err
	}
	if turnID == "" {
		return fmt.Errorf("%w: an injection record needs a turn id", memory.ErrInvalid)
	}
	if _, err := memory.EncodeInjection(in); err != nil {
		return err // what is invalid
	}
	d := injectionDoc{Injection: in}
	if d.IDs == nil {
		d.IDs = []string{}
	}
	if ttl > 0 {
		d.Expires = s.now().UnixNano() + int64(ttl)
	}
	doc, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("redis: encode injection: %w", err)
	}
	return s.wrap("put injection", setFieldExpiring(ctx, s.c, k.injections(), turnID, string(doc), ttl))
}

// GetInjection returns a turn's record (ErrNotFound: none, or expired).
func (s *Store) GetInjection(ctx context.Context, ref memory.SessionRef, turnID string) (memory.Injection, error) {
	k, err := s.sessionKeys(ref)
	if err != nil {
		return memory.Injection{}, err
	}
	v, err := s.c.HGet(ctx, k.injections(), turnID).Result()
	if errors.Is(err, goredis.Nil) {
		return memory.Injection{}, fmt.Errorf("%w: no injection record for %s turn %s", memory.ErrNotFound, ref, turnID)
	}
	if err != nil {
		return memory.Injection{}, s.wrap("get injection", err)
	}
	return s.decodeInjection(v, ref, turnID)
}

var takeScript = goredis.NewScript(`
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v then redis.call('HDEL', KEYS[1], ARGV[1]) end
return v
`)

// TakeInjection returns and deletes a turn's record (ErrNotFound after).
func (s *Store) TakeInjection(ctx context.Context, ref memory.SessionRef, turnID string) (memory.Injection, error) {
	k, err := s.sessionKeys(ref)
	if err != nil {
		return memory.Injection{}, err
	}
	v, err := takeScript.Run(ctx, s.c, []string{k.injections()}, turnID).Text()
	if errors.Is(err, goredis.Nil) {
		return memory.Injection{}, fmt.Errorf("%w: no injection record for %s turn %s", memory.ErrNotFound, ref, turnID)
	}
	if err != nil {
		return memory.Injection{}, s.wrap("take injection", err)
	}
	return s.decodeInjection(v, ref, turnID)
}

// decodeInjection reads a stored record; an expired one is not found.
func (s *Store) decodeInjection(v string, ref memory.SessionRef, turnID string) (memory.Injection, error) {
	if d := strings.TrimSpace(v); strings.HasPrefix(d, "[") {
		in, err := memory.DecodeInjection([]byte(d))
		if err != nil {
			return memory.Injection{}, fmt.Errorf("redis: bad injection record: %w", err)
		}
		return in, nil
	}
	var d injectionDoc
	if err := json.Unmarshal([]byte(v), &d); err != nil {
		return memory.Injection{}, fmt.Errorf("redis: bad injection record: %w", err)
	}
	if d.Expires > 0 && d.Expires <= s.now().UnixNano() {
		return memory.Injection{}, fmt.Errorf("%w: no injection record for %s turn %s (expired)", memory.ErrNotFound, ref, turnID)
	}
	return d.Injection, nil
}

// briefScript: ARGV now, expiry, gc ms. It returns {1, expiry} when it
// took the flag, {0, the holder's expiry} when the flag is taken. The
// expiry goes back as the string it was stored as (a Lua number would
// round nanoseconds).
var briefScript = goredis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and tonumber(v) > tonumber(ARGV[1]) then return {0, v} end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return {1, ARGV[2]}
`)

// BriefOnce sets the briefing flag for ttl (store clock) and reports
// whether this call set it. A flag is never cleared before its expiry, so
// the expiry this process took or found is remembered (memory.BriefMemo)
// and the session's later turns here ask Redis nothing until it passes.
func (s *Store) BriefOnce(ctx context.Context, ref memory.SessionRef, ttl time.Duration) (bool, error) {
	k, err := s.sessionKeys(ref)
	if err != nil {
		return false, err
	}
	if err := s.hold(ctx, ref.ProjectRef()); err != nil {
		return false, err
	}
	if err := memory.CheckTTL(ttl); err != nil {
		return false, err
	}
	now := s.now().UnixNano()
	if s.briefs.Taken(ref, now) {
		return false, nil
	}
	res, err := briefScript.Run(ctx, s.c, []string{k.brief()}, now, now+int64(ttl),
		(ttl + gcMargin).Milliseconds()).Slice()
	if err != nil {
		return false, s.wrap("brief once", err)
	}
	took, expires, err := briefReply(res)
	if err != nil {
		return false, s.wrap("brief once", err)
	}
	s.briefs.Remember(ref, expires, now)
	return took, nil
}

// briefReply decodes briefScript's {took, expiry}.
func briefReply(res []any) (took bool, expires int64, err error) {
	if len(res) != 2 {
		return false, 0, fmt.Errorf("unexpected reply %v", res)
	}
	t, ok := res[0].(int64)
	e, ok2 := res[1].(string)
	if !ok || !ok2 {
		return false, 0, fmt.Errorf("unexpected reply %v", res)
	}
	expires, err = strconv.ParseInt(e, 10, 64)
	if err != nil {
		return false, 0, fmt.Errorf("unexpected expiry %q: %w", e, err)
	}
	return t == 1, expires, nil
}

// leaseScript: ARGV mode (acquire | renew | release), owner, now, expiry,
// gc ms. A lease is in force while its expiry is after now (store clock).
var leaseScript = goredis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'o', 'e')
local o, e = cur[1], tonumber(cur[2] or '0')
local mode, owner, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local held = o and e > now
if mode == 'release' then
  if o == owner then redis.call('DEL', KEYS[1]) end
  return 1
end
if mode == 'renew' then
  if not (held and o == owner) then return 0 end
elseif held and o ~= owner then
  return 0
end
redis.call('HSET', KEYS[1], 'o', owner, 'e', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
`)

func (s *Store) lease(ctx context.Context, op string, ref memory.SessionRef, name, owner string, ttl time.Duration) (bool, error) {
	k, err := s.sessionKeys(ref)
	if err != nil {
		return false, err
	}
	var bad []string
	if memory.CheckLeaseName(name) != nil {
		bad = append(bad, fmt.Sprintf("lease name %q: want a non-empty name without ':', not a name of the session's other keys", name))
	}
	if owner == "" {
		bad = append(bad, "empty lease owner")
	}
	if op != "release" && ttl <= 0 {
		bad = append(bad, fmt.Sprintf("ttl must be positive, got %v", ttl))
	}
	if len(bad) > 0 {
		return false, fmt.Errorf("%w: lease: %s", memory.ErrInvalid, strings.Join(bad, "; "))
	}
	if op == "acquire" {
		if err := s.hold(ctx, ref.ProjectRef()); err != nil {
			return false, err
		}
	}
	now := s.now().UnixNano()
	ok, err := leaseScript.Run(ctx, s.c, []string{k.lease(name)}, op, owner, now, now+int64(ttl),
		max((ttl+gcMargin).Milliseconds(), 1)).Int()
	if err != nil {
		return false, s.wrap(op+" lease", err)
	}
	return ok == 1, nil
}

// AcquireLease takes (or, by its holder, renews) a session's named lease.
func (s *Store) AcquireLease(ctx context.Context, ref memory.SessionRef, name, owner string, ttl time.Duration) (bool, error) {
	return s.lease(ctx, "acquire", ref, name, owner, ttl)
}

// RenewLease extends an unexpired lease held by owner.
func (s *Store) RenewLease(ctx context.Context, ref memory.SessionRef, name, owner string, ttl time.Duration) (bool, error) {
	return s.lease(ctx, "renew", ref, name, owner, ttl)
}

// ReleaseLease releases a lease held by owner (a no-op for anyone else).
func (s *Store) ReleaseLease(ctx context.Context, ref memory.SessionRef, name, owner string) error {
	_, err := s.lease(ctx, "release", ref, name, owner, 0)
	return err
}

// EventProcessed reports whether consumer has a record of eventID that has
// not expired (store clock).
func (s *Store) EventProcessed(ctx context.Context, p memory.ProjectRef, consumer, eventID string) (bool, error) {
	if consumer == "" || eventID == "" {
		return false, fmt.Errorf("%w: a processed-event record needs a consumer and an event id", memory.ErrInvalid)
	}
	v, err := s.c.HGet(ctx, s.keys(space(p)).events(consumer), eventID).Result()
	if errors.Is(err, goredis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, s.wrap("event processed", err)
	}
	exp, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return false, fmt.Errorf("redis: bad processed-event record %q", v)
	}
	return exp == 0 || exp > s.now().UnixNano(), nil
}

// MarkEventProcessed records eventID for consumer for ttl (<= 0: never
// expires).
func (s *Store) MarkEventProcessed(ctx context.Context, p memory.ProjectRef, consumer, eventID string, ttl time.Duration) error {
	if consumer == "" || eventID == "" {
		return fmt.Errorf("%w: a processed-event record needs a consumer and an event id", memory.ErrInvalid)
	}
	if err := s.hold(ctx, p); err != nil {
		return err
	}
	key := s.keys(space(p)).events(consumer)
	var exp int64
	if ttl > 0 {
		exp = s.now().UnixNano() + int64(ttl)
	}
	return s.wrap("mark event processed", setFieldExpiring(ctx, s.c, key, eventID, strconv.FormatInt(exp, 10), ttl))
}
