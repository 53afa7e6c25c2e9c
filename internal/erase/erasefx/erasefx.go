// Package erasefx wires erasure into engram serve: the process answers the
// admin's erasure requests on the bus (<prefix>.admin.erase) with the
// store it holds and the streams of its bus, so that an erasure needs no
// second process to open the SQLite database serve holds.
package erasefx

import (
	"fmt"

	"go.uber.org/fx"
	"go.uber.org/zap"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/erase"
	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/memory"
)

// Module answers erasure requests when the process's connection is the
// admin's (engram serve with its embedded server, or one given admin
// credentials); a least-privilege worker may not subscribe to the subject
// and answers none. It provides *erase.Eraser (the console erases with
// it).
func Module() fx.Option {
	return fx.Module("erase",
		fx.Provide(func(st memory.Store, bus *app.Bus, topo events.Topology) *erase.Eraser {
			return erase.New(st, erase.WithBus(erase.NewBus(bus.JS, topo)), erase.WithShelf(erase.StoreShelf(st)))
		}),
		fx.Invoke(func(lc fx.Lifecycle, rel *app.Releases, e *erase.Eraser, bus *app.Bus, topo events.Topology, log *zap.Logger) error {
			log = log.Named("erase")
			if bus.Role != natsauth.RoleAdmin {
				log.Debug("not answering erasure requests: the connection is not the admin's", zap.String("role", bus.Role))
				return nil
			}
			subject := erase.Subject(topo.Prefix)
			r, err := erase.Serve(bus.Conn, subject, e, func(err error) {
				log.Warn("erasure failed", zap.Error(err)) // without the scope's ids (erase.Anonymous)
			})
			if err != nil {
				return fmt.Errorf("erasefx: %w", err)
			}
			log.Debug("answering erasure requests", zap.String("subject", subject))
			lc.Append(fx.StopHook(rel.Add(func() { _ = r.Stop() })))
			return nil
		}),
	)
}
