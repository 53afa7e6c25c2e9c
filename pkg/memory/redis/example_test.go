package redis_test

import (
	"context"
	"fmt"
	"log"
	"os"

	goredis "github.com/redis/go-redis/v9"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

// Open a store on Redis 8 (standalone or cluster: any UniversalClient),
// remember something and find it again. Run Redis 8 here with
// `bash scripts/redis8.sh start`.
func Example() {
	ctx := context.Background()
	client := goredis.NewUniversalClient(&goredis.UniversalOptions{Addrs: []string{os.Getenv("REDIS_ADDR")}})
	defer client.Close()
	store, err := redis.New(client, redis.WithNamespace("engram"))
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Ping(ctx); err != nil {
		log.Fatal(err) // not reachable, or older than Redis 8
	}
	res, err := store.Upsert(ctx, memory.Node{
		Subkind: memory.Decision, ProjectID: "shop", Label: "Orders use PostgreSQL replication",
		AssertedBy: memory.AssertedUser,
	})
	if err != nil {
		log.Fatal(err)
	}
	hits, err := store.Lexical(ctx, memory.Terms("postgres replication"), memory.Filter{ProjectID: "shop"}, 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Created, len(hits) > 0 && hits[0].ID == res.Node.ID)
}
