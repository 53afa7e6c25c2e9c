package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/config"
	"github.com/engram-memory/engram/internal/demo"
	"github.com/engram-memory/engram/pkg/memory"
)

func init() {
	register("serve", "run Engram: embedded NATS (or ENGRAM_NATS_URL), store, workers, idle detector, health", serve)
}

// The models serve can use: Ollama (the default), or the scripted demo
// model (internal/demo) that shows the loop without a GPU.
const (
	modelOllama = "ollama"
	modelDemo   = "demo"
)

func serve(ctx context.Context, _ io.Writer, args []string) error {
	model := modelOllama
	if v, ok := os.LookupEnv("ENGRAM_MODEL"); ok && v != "" {
		model = v
	}
	cfg, _, err := loadConfig("serve", args, config.All, func(fs *flag.FlagSet) {
		fs.StringVar(&model, "model", model, "serve: the model of extraction, consolidation and compaction: ollama (ENGRAM_OLLAMA_HOST and the *_MODEL settings) "+
			"or demo (a scripted stand-in that follows simple rules, in-process, no GPU: to see the loop work; not a language model) [$ENGRAM_MODEL]")
	})
	if err != nil {
		return err
	}
	// serve opens the store even when no worker asks for it yet, so that a
	// broken data dir shows at start and /readyz reports the store.
	opts := append([]fx.Option{fx.Invoke(func(memory.Store) {})}, workerModules...)
	opts = append(opts, serveModules...)
	switch model {
	case modelOllama:
	case modelDemo:
		d, err := demo.Start()
		if err != nil {
			return err
		}
		defer d.Close()
		d.Configure(&cfg.LLM)
		opts = append(opts, fx.Invoke(func(log *zap.Logger) {
			log.Warn("DEMO MODEL: extraction, consolidation and compaction are answered by a scripted stand-in that follows simple rules, not by a language model (serve -model demo); use Ollama for real memory",
				zap.String("model", demo.Model), zap.String("url", d.URL()))
		}))
	default:
		return fmt.Errorf("%w: -model %q: want %s or %s", errUsage, model, modelOllama, modelDemo)
	}
	return app.Serve(ctx, cfg, true, "engram-serve", opts...)
}

// serveModules are what `engram serve` runs beside its workers (the
// memory tool's HTTP endpoint); a file of this folder adds one with
// registerServe in an init function.
var serveModules []fx.Option

func registerServe(m fx.Option) { serveModules = append(serveModules, m) }
