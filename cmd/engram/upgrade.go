package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/pkg/memory/redis"
)

func init() {
	register("upgrade", "a Redis store's format after a rolling upgrade: engram upgrade status | finish (once every replica runs this version) | rollback (before an earlier version writes again)", upgradeCmd)
}

const upgradeUsage = "engram upgrade status | finish | rollback"

// upgradeCmd reads or changes the format of a Redis store (see
// pkg/memory/redis format.go): what every replica writes but only the
// operator knows to be complete, because a replica of an earlier version,
// still running during a rolling upgrade, does not keep it.
func upgradeCmd(ctx context.Context, stdout io.Writer, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: %s", errUsage, upgradeUsage)
	}
	sub := args[0]
	if sub != "status" && sub != "finish" && sub != "rollback" {
		return fmt.Errorf("%w: %s", errUsage, upgradeUsage)
	}
	cfg, fs, err := loadConfig("upgrade "+sub, args[1:], config.Runtime|config.Conn, nil)
	if err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: %s", errUsage, upgradeUsage)
	}
	if cfg.Store.Kind != config.StoreRedis {
		// The SQLite store migrates its file when it opens it: one process
		// holds it, so no replica of another version writes beside it.
		out(stdout, "the %s store has no format to finish: it is brought up to date when it opens\n", cfg.Store.Kind)
		return nil
	}
	st, err := openStore(ctx, cfg, "")
	if err != nil {
		return err
	}
	defer st.Close()
	rs, ok := st.(*redis.Store)
	if !ok {
		return errors.New("upgrade: the configured store is not a Redis store")
	}
	switch sub {
	case "finish":
		start := time.Now()
		last := start
		rep, err := rs.FinishUpgrade(ctx, func(done redis.UpgradeReport, scopes int) {
			if time.Since(last) >= 5*time.Second { // a big store takes minutes
				last = time.Now()
				fmt.Fprintf(os.Stderr, "engram upgrade finish: %d of %d scopes done, %d nodes and %d terms read, %s\n",
					done.Scopes, scopes, done.Nodes, done.Terms, time.Since(start).Round(time.Second))
			}
		})
		if err != nil {
			return err
		}
		out(stdout, "format %d -> %d: %d scopes, %d nodes, %d node copies written, %d copies of erased nodes dropped, %d document frequencies of %d terms set, %d projects with memories of reach anywhere, in %s\n",
			rep.From, rep.To, rep.Scopes, rep.Nodes, rep.Copies, rep.Dropped, rep.DocFreqs, rep.Terms, rep.Reach, time.Since(start).Round(time.Millisecond))
		return nil
	case "rollback":
		if err := rs.SetFormat(ctx, redis.FormatBase); err != nil {
			return err
		}
		out(stdout, "format %d: replicas stop reading what earlier versions do not keep within %s; an earlier version may write again after that\n",
			redis.FormatBase, redis.FormatTTL)
		return nil
	}
	f, err := rs.Format(ctx)
	if err != nil {
		return err
	}
	if f > redis.FormatLatest {
		out(stdout, "format %d: newer than this version's %d (a replica of a later version finished its upgrade)\n", f, redis.FormatLatest)
		return nil
	}
	if f == redis.FormatLatest {
		out(stdout, "format %d (the latest)\n", f)
		return nil
	}
	out(stdout, "format %d of %d: once every replica runs this version, run `engram upgrade finish`\n", f, redis.FormatLatest)
	return nil
}
