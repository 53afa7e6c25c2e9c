package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
)

var _ memory.Letters = (*Store)(nil)

// Parked letters live under one hash tag of their own ({l}), apart from
// every project: a hash of the letters by key and a sorted set of the keys
// by first parking time (microseconds: exact in a float64 score).
func (s *Store) lettersKey() string   { return s.ns + ":{l}:letters" }
func (s *Store) lettersAtKey() string { return s.ns + ":{l}:letterat" }

// ParkLetter implements memory.Letters.
func (s *Store) ParkLetter(ctx context.Context, key string, data []byte) error {
	if key == "" {
		return fmt.Errorf("%w: a parked letter needs a key", memory.ErrInvalid)
	}
	if data == nil {
		data = []byte{}
	}
	_, err := s.c.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
		pipe.HSet(ctx, s.lettersKey(), key, data)
		pipe.ZAddNX(ctx, s.lettersAtKey(), goredis.Z{Score: float64(s.now().UnixMicro()), Member: key})
		return nil
	})
	return s.wrap("park letter", err)
}

// ParkedLetters implements memory.Letters.
func (s *Store) ParkedLetters(ctx context.Context, limit int) ([]memory.ParkedLetter, error) {
	stop := int64(limit) - 1
	if limit <= 0 {
		stop = -1
	}
	zs, err := s.c.ZRangeWithScores(ctx, s.lettersAtKey(), 0, stop).Result()
	if err != nil {
		return nil, s.wrap("parked letters", err)
	}
	if len(zs) == 0 {
		return nil, nil
	}
	keys := make([]string, len(zs))
	for i, z := range zs {
		keys[i], _ = z.Member.(string)
	}
	vals, err := s.c.HMGet(ctx, s.lettersKey(), keys...).Result()
	if err != nil {
		return nil, s.wrap("parked letters", err)
	}
	out := make([]memory.ParkedLetter, 0, len(keys))
	for i, v := range vals {
		data, ok := v.(string)
		if !ok {
			continue // dropped meanwhile by another mover
		}
		out = append(out, memory.ParkedLetter{Key: keys[i], Data: []byte(data), Parked: time.UnixMicro(int64(zs[i].Score)).UTC()})
	}
	return out, nil
}

// CountParkedLetters implements memory.Letters.
func (s *Store) CountParkedLetters(ctx context.Context) (int, error) {
	n, err := s.c.ZCard(ctx, s.lettersAtKey()).Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		return 0, s.wrap("count parked letters", err)
	}
	return int(n), nil
}

// DropParkedLetter implements memory.Letters.
func (s *Store) DropParkedLetter(ctx context.Context, key string) error {
	_, err := s.c.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
		pipe.HDel(ctx, s.lettersKey(), key)
		pipe.ZRem(ctx, s.lettersAtKey(), key)
		return nil
	})
	return s.wrap("drop parked letter", err)
}
