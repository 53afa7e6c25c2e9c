package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/chaos"
)

// params are the suite's knobs (environment, see the package doc).
type params struct {
	turns, perSession, clients, kills int
	outage, think                     time.Duration
	seed                              uint64
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func loadParams() params {
	p := params{
		turns:      envInt("ENGRAM_CHAOS_TURNS", 10000),
		perSession: envInt("ENGRAM_CHAOS_TURNS_PER_SESSION", 40),
		clients:    envInt("ENGRAM_CHAOS_CLIENTS", 8),
		kills:      envInt("ENGRAM_CHAOS_KILLS", 60),
		outage:     10 * time.Minute,
		think:      250 * time.Millisecond,
		seed:       uint64(envInt("ENGRAM_CHAOS_SEED", int(time.Now().UnixNano()%1e9))),
	}
	if d, err := time.ParseDuration(os.Getenv("ENGRAM_CHAOS_OUTAGE")); err == nil && d > 0 {
		p.outage = d
	}
	if d, err := time.ParseDuration(os.Getenv("ENGRAM_CHAOS_THINK")); err == nil && d >= 0 {
		p.think = d
	}
	return p
}

// chaosLog is what the chaos loop did, for the report.
type chaosLog struct {
	mu            sync.Mutex
	kills         map[string]int
	natsDown      time.Duration
	redisDown     time.Duration
	outage        time.Duration
	killedLate    int // kills after the replay ended (during the drain)
	startFailures int // starts that failed because a dependency was down (restarted)
	events        []string
}

func (l *chaosLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, time.Now().Format("15:04:05.000")+" "+fmt.Sprintf(format, args...))
}

func (l *chaosLog) totalKills() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, k := range l.kills {
		n += k
	}
	return n
}

// TestChaos is the multi-process end-to-end suite with chaos (package doc).
func TestChaos(tt *testing.T) {
	if os.Getenv("ENGRAM_CHAOS") == "" {
		tt.Skip("the multi-process chaos suite runs with ENGRAM_CHAOS=1: make chaos (scripts/chaos.sh)")
	}
	t := &recT{T: tt}
	defer t.summary()
	p := loadParams()
	t.Logf("chaos: %d turns (%d per session, %d clients, %v between a block and turn_ended), %d kills, model outage %v, seed %d",
		p.turns, p.perSession, p.clients, p.think, p.kills, p.outage, p.seed)
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()

	c := newCluster(tt)
	c.build()
	c.startInfra(ctx)
	c.setup(ctx)
	c.connect()
	t.Logf("deployment up in %v (logs in %s)", time.Since(t0).Round(time.Millisecond), c.path("logs"))

	d := &driver{c: c, injectTimeout: 3 * time.Second, thinking: p.think}
	if err := d.listen(); err != nil {
		t.Fatal(err)
	}

	// 1. Without chaos: the blocks of a conversation recall what its earlier
	// turns established.
	warm := warmUp(ctx, t, c, d)

	// 2. The replay, with chaos.
	rng := rand.New(rand.NewPCG(p.seed, p.seed^0x9e3779b97f4a7c15))
	log := &chaosLog{kills: map[string]int{}}
	replayStart := time.Now()
	replayDone := make(chan struct{})
	var replayErr error
	go func() {
		defer close(replayDone)
		replayErr = d.replay(ctx, "s", p.turns, p.perSession, p.clients)
	}()
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		runChaos(ctx, t, c, d, p, rng, log, warm, replayDone)
	}()
	<-replayDone
	replayWall := time.Since(replayStart)
	if replayErr != nil {
		t.Fatalf("replay: %v", replayErr)
	}
	<-chaosDone
	t.Logf("replay of %d turns in %v; chaos: %d kills %v", p.turns, replayWall.Round(time.Second), log.totalKills(), log.kills)

	// 3. Everything processed: every consumer drained, and stays so for
	// longer than the idle detector's quiet time (so every session_idle
	// is published and consolidated).
	drainStart := time.Now()
	state, err := c.waitDrained(ctx, 3*idleQuiet, 15*time.Minute)
	if err != nil {
		dumpTails(t, c)
		t.Fatalf("drain: %v", err)
	}
	t.Logf("drained in %v: %s", time.Since(drainStart).Round(time.Second), state)

	// 4. The checks.
	r := check(ctx, t, c, d, warm)
	r.Turns, r.Kills, r.KillsByRole = len(d.turns), log.totalKills(), log.kills
	r.NATSRestarts, r.RedisRestarts, r.NATSDown, r.RedisDown, r.ModelOutage = 1, 1, log.natsDown.String(), log.redisDown.String(), log.outage.String()
	r.Wall, r.Replay = time.Since(t0).Round(time.Second).String(), replayWall.Round(time.Second).String()
	r.Seed, r.StartFailures, r.KillsDuringDrain = p.seed, log.startFailures, log.killedLate
	r.Model = c.modelStats()
	out, _ := json.MarshalIndent(r, "", "  ")
	t.Logf("report:\n%s", out)
	for _, e := range log.events {
		t.Log("chaos: " + e)
	}
	if f := os.Getenv("ENGRAM_CHAOS_REPORT"); f != "" {
		if err := os.WriteFile(f, append(out, '\n'), 0o644); err != nil {
			t.Error(err)
		}
	}
	if r.Kills < min(p.kills, 50) {
		t.Errorf("only %d kills, want at least %d", r.Kills, min(p.kills, 50))
	}
}

// warmUp plays two sessions of 7 turns one turn at a time, waiting for the
// workers after each, and returns their records.
func warmUp(ctx context.Context, t *recT, c *cluster, d *driver) []*turnRec {
	t.Helper()
	var recs []*turnRec
	for i := range 2 {
		sid := session("w", i)
		for turn := range 7 {
			rec, err := d.turn(ctx, project(i), sid, turn)
			if err != nil {
				t.Fatalf("warm-up: %v", err)
			}
			recs = append(recs, rec)
			if _, err := c.waitDrained(ctx, 0, time.Minute); err != nil {
				t.Fatalf("warm-up: %v", err)
			}
		}
	}
	// From turn 3 on, the turn's fact was stored by turn t-3: its block
	// must recall it.
	for _, rec := range recs {
		if !rec.replied {
			t.Errorf("warm-up %s/%s: no block", rec.session, rec.turn)
			continue
		}
		w := chaos.FactWords(rec.session, rec.index%chaos.FactsPerSession)
		if rec.index >= chaos.FactsPerSession && !strings.Contains(rec.block, w[0]+" "+w[1]) {
			t.Errorf("warm-up %s/%s: block lacks %q:\n%s", rec.session, rec.turn, chaos.FactLabel(rec.session, rec.index%chaos.FactsPerSession), rec.block)
		}
	}
	return recs
}

// runChaos kills a random worker at random points of the replay
// (p.kills in all, the last ones possibly during the drain), restarts NATS
// at 30% of the turns and Redis at 50%, and takes the model down at 65%
// for p.outage (first half connection refused, second half 503).
func runChaos(ctx context.Context, t *recT, c *cluster, d *driver, p params, rng *rand.Rand, log *chaosLog, warm []*turnRec, replayDone <-chan struct{}) {
	base := int64(len(warm))
	total := int64(p.turns)
	points := make([]int64, p.kills)
	for i := range points {
		points[i] = int64(float64(total) * (0.02 + 0.93*rng.Float64()))
	}
	sort.Slice(points, func(i, j int) bool { return points[i] < points[j] })
	ms := []*milestone{{at: total * 30 / 100, name: "nats"}, {at: total * 50 / 100, name: "redis"}, {at: total * 65 / 100, name: "model"}}
	outageDone := make(chan struct{})
	outageStarted := false
	next := 0
	for next < len(points) || !outageStarted || !msDone(ms) {
		progress := d.done.Load() - base
		select {
		case <-replayDone:
			progress = total // the rest happen during the drain
		default:
		}
		for _, m := range ms {
			if m.done || progress < m.at {
				continue
			}
			m.done = true
			switch m.name {
			case "nats":
				down := 3*time.Second + time.Duration(rng.IntN(3000))*time.Millisecond
				log.add("kill -9 nats-server at turn %d, down %v", progress, down)
				c.nats.kill()
				time.Sleep(down)
				c.startNATS(ctx)
				log.natsDown = down
				log.add("nats-server restarted")
			case "redis":
				down := 3*time.Second + time.Duration(rng.IntN(3000))*time.Millisecond
				log.add("kill -9 redis-server at turn %d, down %v", progress, down)
				c.redis.kill()
				time.Sleep(down)
				c.startRedis(ctx)
				log.redisDown = down
				log.add("redis-server restarted")
			case "model":
				outageStarted = true
				log.add("model down at turn %d for %v", progress, p.outage)
				c.modelControl("down")
				go func() {
					defer close(outageDone)
					time.Sleep(p.outage / 2)
					c.modelControl("up")
					c.modelControl("unavailable")
					log.add("model answers 503")
					time.Sleep(p.outage / 2)
					c.modelControl("up")
					log.outage = p.outage
					log.add("model up")
				}()
			}
		}
		if next < len(points) && progress >= points[next] {
			var running []*proc
			for _, w := range c.workers {
				if !w.exited() {
					running = append(running, w)
				}
			}
			if len(running) > 0 {
				victim := running[rng.IntN(len(running))]
				if victim.kill() {
					log.mu.Lock()
					log.kills[strings.SplitN(victim.name, "-", 2)[0]]++
					if progress >= total {
						log.killedLate++
					}
					log.mu.Unlock()
					log.add("kill -9 %s at turn %d", victim.name, progress)
					next++
				}
				// Restarted after 0.2-2 s.
				time.Sleep(time.Duration(200+rng.IntN(1800)) * time.Millisecond)
				victim.start(t.T)
			}
		}
		supervise(t, c, log)
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	// The replay may end first: keep supervising until the model is back.
	for {
		select {
		case <-outageDone:
			supervise(t, c, log)
			return
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
			supervise(t, c, log)
		}
	}
}

type milestone struct {
	at   int64
	name string
	done bool
}

func msDone(ms []*milestone) bool {
	for _, m := range ms {
		if !m.done {
			return false
		}
	}
	return true
}

// supervise restarts a worker that exited by itself, like a deployment's
// restart policy. A worker that could not start (its store or bus was down:
// it exits with the reason, by design) is restarted and counted; one that
// exited after it was ready crashed: a test failure.
func supervise(t *recT, c *cluster, log *chaosLog) {
	for _, w := range c.workers {
		if !w.exited() {
			continue
		}
		tail := w.tail(50)
		if strings.Contains(tail, `"engram ready"`) {
			t.Errorf("%s crashed:\n%s", w.name, tail)
		} else {
			log.mu.Lock()
			log.startFailures++
			log.mu.Unlock()
			last := tail[strings.LastIndexByte(strings.TrimRight(tail, "\n"), '\n')+1:]
			log.add("%s could not start (restarted in 1 s): %.200s", w.name, last)
			time.Sleep(time.Second)
		}
		w.start(t.T)
	}
}

func dumpTails(t *recT, c *cluster) {
	for _, w := range c.workers {
		t.Logf("--- %s (%d starts):\n%s", w.name, w.starts, w.tail(15))
	}
}
