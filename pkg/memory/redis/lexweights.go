package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

// Lexical index versions. The version of a scope's postings is the field
// "v" of its corpus statistics (k.stats()); a scope without it was indexed
// by version 1.
//
//	1: label, body, paths and entity names counted once each.
//	2: the label counted twice (BM25F with label weight 2: the label is
//	   what a memory is about; on the development set this took the
//	   ranker's R@5 from 0.798 to 0.808 and R@10 from 0.877 to 0.897).
//
// Both versions index the same set of terms, so moving a document from
// one to the other changes only its term frequencies and its length.
const (
	lexVersion      = 2
	lexVersionField = "v"
)

// relexScript moves one document's postings to the current weighting: it
// rewrites the postings of the given terms with their new frequencies and
// the new length, and corrects the scope's total length. The document's
// indexed length is read back from its first posting (the low 16 bits of
// the packed score, see reindexLexScript), which makes the script
// idempotent: a document already at the new length is left alone, so an
// interrupted migration can simply run again.
//
// It drops the cached heads of the terms it rewrites (lexhead.go).
//
// A term it adds to the dictionary (there should be none: both versions
// index the same terms) sets its bucket's version (lexdict.go).
//
// It sets the document frequency of each term it writes (K df, see
// luaDocFreqs).
//
// KEYS: term dictionary, corpus statistics, heads hash, dictionary
// versions, document frequencies. ARGV: key prefix, id, new length, version token, then term, tf
// pairs (the document's terms under the new weighting). Reply: 1 when
// rewritten, 0 when already current or not indexed.
var relexScript = goredis.NewScript(luaDictField + `
local p, id = ARGV[1], ARGV[2]
local dl = tonumber(ARGV[3])
if #ARGV < 6 then return 0 end
local cur = redis.call('ZSCORE', p .. 't:' .. ARGV[5], id)
if not cur then return 0 end
local olddl = tonumber(cur) % 65536
local cdl = dl
if cdl > 65535 then cdl = 65535 end
if olddl == cdl then return 0 end
local st = redis.call('HMGET', KEYS[2], 'n', 'l')
local n, l = tonumber(st[1]) or 0, tonumber(st[2]) or 0
local avg = cdl
if n > 0 and l > 0 then avg = l / n end
if avg < 1 then avg = 1 end
for i = 5, #ARGV, 2 do
  local t, tf = ARGV[i], tonumber(ARGV[i + 1])
  redis.call('DEL', p .. 'th:' .. t)
  redis.call('HDEL', KEYS[3], t)
  if tf > 8191 then tf = 8191 end
  local imp = tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * cdl / avg))
  local q = math.floor(imp / 2.2 * 65535)
  redis.call('ZADD', p .. 't:' .. t, q * 536870912 + tf * 65536 + cdl, id)
  redis.call('HSET', KEYS[5], t, redis.call('ZCARD', p .. 't:' .. t))
  if redis.call('ZADD', KEYS[1], 0, t) == 1 then
    redis.call('HSET', KEYS[4], dictField(t), ARGV[4])
  end
end
redis.call('HINCRBY', KEYS[2], 'l', dl - olddl)
return 1
`)

// EnsureLexicalIndex brings the lexical postings of every project (and the
// global tag) indexed by an earlier version to the current weighting
// (lexVersion): data written before the label weighed twice. It reads every
// node of such a scope once (one pipeline per page of a ZSCAN), so it
// belongs at start-up (app.OpenStore calls it); scopes that are current
// cost one pipelined HGET each. It is idempotent (see relexScript) and safe
// beside writers of this version. Until it has run, old documents still
// match, with their old weights. It returns how many documents it
// rewrote.
func (s *Store) EnsureLexicalIndex(ctx context.Context) (int, error) {
	return s.upgradeScopes(ctx, "lexical index", lexVersionField, lexVersion, func(ctx context.Context, k keys, nodes []memory.Node) (int, error) {
		pipe := s.c.Pipeline()
		cmds := make([]*goredis.Cmd, 0, len(nodes))
		for i := range nodes {
			tf, length := docTokens(&nodes[i])
			args := make([]any, 0, 3+2*len(tf))
			args = append(args, k.p, nodes[i].ID, length, dictToken())
			for t, c := range tf {
				args = append(args, t, c)
			}
			cmds = append(cmds, relexScript.Eval(ctx, pipe, []string{k.terms(), k.stats(), k.heads(), k.dictVersions(), k.docFreqs()}, args...))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return 0, err
		}
		done := 0
		for _, c := range cmds {
			if v, _ := c.Int(); v == 1 {
				done++
			}
		}
		return done, nil
	})
}
