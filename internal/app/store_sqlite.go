package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/pkg/memory"
	"github.com/engram-memory/engram/pkg/memory/sqlite"
)

// openSQLite opens (creating) the SQLite store at path.
func openSQLite(ctx context.Context, path string, opts ...sqlite.Option) (memory.Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("app: sqlite store: %w", err)
	}
	s, err := sqlite.Open(ctx, path, opts...)
	if err != nil {
		return nil, fmt.Errorf("app: sqlite store: %w", err)
	}
	return s, nil
}

// RegisterLoadGauges exports how far s has got loading its in-memory index
// (the process registers them for its SQLite store; deploy tests them):
// engram_store_index_loading{part="memories"|"vectors"} is 1 while that
// part loads, engram_store_index_loaded_memories counts the memories
// loaded.
func RegisterLoadGauges(reg prometheus.Registerer, s *sqlite.Store) error {
	loading := func(part string, done func(memory.LoadStatus) bool) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "engram_store_index_loading",
			Help:        "1 while the SQLite store loads that part of its in-memory index after start (memories: the injector answers from those loaded; vectors: the vector channel answers by exact search), else 0.",
			ConstLabels: prometheus.Labels{"part": part},
		}, func() float64 {
			if done(s.LoadStatus()) {
				return 0
			}
			return 1
		})
	}
	for _, c := range []prometheus.Collector{
		loading("memories", func(st memory.LoadStatus) bool { return st.Nodes }),
		loading("vectors", func(st memory.LoadStatus) bool { return st.Vectors }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "engram_store_index_loaded_memories",
			Help: "Memories the SQLite store has loaded into its in-memory index since start.",
		}, func() float64 { return float64(s.LoadStatus().Loaded) }),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("app: store metrics: %w", err)
		}
	}
	return nil
}

// watchLoad logs the store's background load when it holds memories: that
// it is loading (when that takes over a second), when every memory is
// loaded and when the vector index is built. An empty store logs nothing
// (serve logs only its ready line then). The returned function stops the
// watcher and waits for it.
func watchLoad(s *sqlite.Store, log *zap.Logger) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		first, cancelFirst := context.WithTimeout(ctx, time.Second)
		err := s.WaitLoaded(first)
		cancelFirst()
		if err != nil && ctx.Err() == nil && first.Err() != nil {
			log.Info("loading the memory index in the background; until it is loaded the injector answers from the memories loaded so far and the other workers wait",
				zap.Int("memories", s.LoadStatus().Total))
			err = s.WaitLoaded(ctx)
		}
		if err != nil {
			if ctx.Err() == nil {
				log.Error("memory index failed to load; the store answers from what was loaded", zap.Error(err))
			}
			return
		}
		st := s.LoadStatus()
		if st.Total == 0 {
			return
		}
		log.Info("memory index loaded", zap.Int("memories", st.Loaded), zap.Duration("took", st.NodesIn),
			zap.Int("collections", st.Collections), zap.Duration("collecting", st.CollectedIn))
		if !st.Vectors {
			log.Info("building the vector index; until it is built the vector channel answers by exact search")
		}
		if err := s.WaitIndexed(ctx); err != nil {
			return
		}
		log.Info("vector index ready", zap.Duration("took", s.LoadStatus().VectorsIn))
		// The load's garbage (rows decoded, the builders' scratch) is
		// much of the heap now, and the runtime keeps freed memory as long
		// as the heap's goal (twice what is live) allows: given back once
		// here, the resident memory starts from what the index holds (100,000
		// LongMemEval-size memories: 1,038 -> 557 MB resident after the load).
		debug.FreeOSMemory()
	}()
	return func() {
		cancel()
		<-done
	}
}
