package injectfx_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/fx"

	"github.com/engram-memory/engram/internal/app"
	"github.com/engram-memory/engram/internal/app/apptest"
	"github.com/engram-memory/engram/internal/inject/injectbench"
	"github.com/engram-memory/engram/internal/inject/injectfx"
	"github.com/engram-memory/engram/internal/natsauth"
	"github.com/engram-memory/engram/pkg/events"
	"github.com/engram-memory/engram/pkg/llm/llmtest"
	"github.com/engram-memory/engram/pkg/memory"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkFlood is the flood on a whole process (embedded NATS,
// SQLite, the injector with its real wiring): one tenant's 50 sessions
// publish 1,000 turn_started each (ENGRAM_FLOOD_SESSIONS, _TURNS) as fast as
// they can, each with the client's 1.5 s reply deadline, while 10 other
// tenants (ENGRAM_FLOOD_VICTIMS) each run turns through Inject, one after
// the other, until the injector has drained the flood. Every project holds
// 300 memories. Reported: the other tenants' turn latency (p50, p99, max),
// their timeouts, and what became of the flood (answered or expired).
// Every tenant is a named one (the tenants file), so each has its injector
// lane; ENGRAM_FLOOD_LANES=0 leaves them unnamed (one consumer for all, as
// a deployment without tenant credentials has). ENGRAM_FLOOD_ACKS=1 also
// reports how long the victims' publishes waited for the stream's
// acknowledgement.
//
//	go test -run '^$' -bench Flood -benchtime 1x ./internal/inject/injectfx/
func BenchmarkFlood(b *testing.B) {
	sessions, perSession := envInt("ENGRAM_FLOOD_SESSIONS", 50), envInt("ENGRAM_FLOOD_TURNS", 1000)
	victims := envInt("ENGRAM_FLOOD_VICTIMS", 10)
	for range b.N {
		floodOnce(b, sessions, perSession, victims)
	}
}

func victimNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("victim%d", i)
	}
	return out
}

func floodOnce(b *testing.B, sessions, perSession, victims int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	srv := llmtest.New(b)
	cfg := apptest.Config(b, srv.Config())
	if n := envInt("ENGRAM_FLOOD_CONCURRENCY", 0); n > 0 {
		cfg.Work.PerWorker = map[string]int{events.ConsumerInjector: n}
	}
	if n := envInt("ENGRAM_FLOOD_MAX_ACK_PENDING", 0); n > 0 {
		cfg.Events.MaxAckPending = n
	}
	// A multi-tenant deployment: every tenant has its platform
	// credentials (the tenants file), hence its injector lane
	// (ENGRAM_FLOOD_LANES=0: the tenants unregistered, no lanes).
	if os.Getenv("ENGRAM_FLOOD_LANES") != "0" {
		for _, tenant := range append([]string{"flood"}, victimNames(victims)...) {
			if _, err := natsauth.AddTenant(cfg.DataDir, tenant, false); err != nil {
				b.Fatal(err)
			}
		}
	}
	var st memory.Store
	run := apptest.StartConfig(ctx, b, cfg, "injectfx-flood", events.ConsumerInjector,
		[]fx.Option{injectfx.Module(), fx.Populate(&st)})
	seedProject := func(tenant, project string) {
		nodes := injectbench.Filler(300, uint64(len(tenant)+len(project)))
		for i := range nodes {
			nodes[i].ID = ""
			nodes[i].TenantID, nodes[i].ProjectID = tenant, project
		}
		if err := st.PutBatch(ctx, nodes, nil); err != nil {
			b.Fatal(err)
		}
	}
	seedProject("flood", "f")
	for v := range victims {
		seedProject(fmt.Sprintf("victim%d", v), "p")
	}

	// The flood comes from its own platform: a connection of its own, as
	// another tenant's platform would have (on the victims' connection
	// its publishes would queue in front of theirs in the client).
	auth, _, err := app.ConnectOptions(cfg, natsauth.RoleAdmin)
	if err != nil {
		b.Fatal(err)
	}
	fnc, err := nats.Connect(run.Process.Bus.URL, auth...)
	if err != nil {
		b.Fatal(err)
	}
	defer fnc.Close()
	flooder, err := events.NewClient(fnc, events.WithPrefix(cfg.Events.SubjectPrefix))
	if err != nil {
		b.Fatal(err)
	}
	var published atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for s := range sessions {
		wg.Go(func() {
			for i := range perSession {
				ref := events.Ref{TenantID: "flood", ProjectID: "f", SessionID: fmt.Sprintf("s%d", s), TurnID: fmt.Sprintf("t%d", i)}
				// What Inject sends, without waiting for the answer.
				if _, err := flooder.PublishTurnStarted(ctx, ref, events.TurnStarted{Text: "status of the deploy pipeline?",
					ReplyBy: time.Now().Add(events.DefaultInjectTimeout)}); err == nil {
					published.Add(1)
				}
			}
		})
	}
	var mu sync.Mutex
	var lat, acks []float64
	var timeouts atomic.Int64
	var vwg sync.WaitGroup
	stop := make(chan struct{})
	for v := range victims {
		vwg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				var err error
				if os.Getenv("ENGRAM_FLOOD_ACKS") != "" {
					// What Inject does, with the publish's acknowledgement
					// timed apart: the stream's share of the latency.
					tenant := fmt.Sprintf("victim%d", v)
					inbox := events.TenantInbox(tenant) + "." + nats.NewInbox()
					sub, _ := run.Conn.SubscribeSync(inbox)
					e := events.NewTurnStarted(events.Ref{TenantID: tenant, ProjectID: "p", SessionID: "s", TurnID: fmt.Sprintf("t%d", i)},
						events.TurnStarted{Text: "what did we decide about the deploys?", ReplyTo: inbox, ReplyBy: time.Now().Add(1500 * time.Millisecond)})
					err = run.Client.Publish(ctx, e)
					ta := time.Since(t0)
					_, err = sub.NextMsg(1500 * time.Millisecond)
					sub.Unsubscribe()
					mu.Lock()
					acks = append(acks, float64(ta.Microseconds())/1000)
					mu.Unlock()
				} else {
					_, err = run.Client.Inject(ctx, events.Ref{TenantID: fmt.Sprintf("victim%d", v), ProjectID: "p",
						SessionID: "s", TurnID: fmt.Sprintf("t%d", i)}, events.TurnStarted{Text: "what did we decide about the deploys?"})
				}
				d := time.Since(t0)
				if err != nil {
					timeouts.Add(1)
					continue
				}
				mu.Lock()
				lat = append(lat, float64(d.Microseconds())/1000)
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	publishTime := time.Since(start)
	js, err := jetstream.New(run.Conn)
	if err != nil {
		b.Fatal(err)
	}
	for {
		c, err := js.Consumer(ctx, events.StreamIn, events.ConsumerInjector)
		if err != nil {
			b.Fatal(err)
		}
		ci, err := c.Info(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if ci.NumPending == 0 && ci.NumAckPending == 0 || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	drained := time.Since(start)
	close(stop)
	vwg.Wait()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	if len(acks) > 0 {
		slices.Sort(acks)
		b.Logf("publish acks p50 %.1f p99 %.1f max %.1f", acks[len(acks)/2], acks[len(acks)*99/100], acks[len(acks)-1])
	}
	b.ReportMetric(pct(0.50), "victim-p50-ms")
	b.ReportMetric(pct(0.99), "victim-p99-ms")
	b.ReportMetric(float64(timeouts.Load()), "victim-timeouts")
	b.ReportMetric(float64(len(lat)), "victim-turns")
	b.Logf("flood: %d turn_started published in %v, drained after %v; other tenants: %d turns answered, %d timed out, p50 %.1f ms, p99 %.1f ms, max %.1f ms",
		published.Load(), publishTime.Round(time.Millisecond), drained.Round(time.Millisecond), len(lat), timeouts.Load(), pct(0.5), pct(0.99), pct(1))
}
