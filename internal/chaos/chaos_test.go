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
	"sync/atomic"
	"testing"
	"time"

	"github.com/engram-memory/engram/internal/chaos"
)

// params are the suite's knobs (environment, see the package doc).
type params struct {
	turns, perSession, clients, kills int
	natsKills, redisKills             int // kill -9 of a NATS node / a Redis primary (1 and 1 for the single servers)
	outage, think                     time.Duration
	seed                              uint64
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// loadParams reads the knobs of the single-server run (ENGRAM_CHAOS_*)
// or of the clustered one (ENGRAM_CHAOS_CLUSTER_* for its length, kills
// and outage; the rest shared).
func loadParams(clustered bool) params {
	p := params{
		turns:      envInt("ENGRAM_CHAOS_TURNS", 10000),
		perSession: envInt("ENGRAM_CHAOS_TURNS_PER_SESSION", 40),
		clients:    envInt("ENGRAM_CHAOS_CLIENTS", 8),
		kills:      envInt("ENGRAM_CHAOS_KILLS", 60),
		natsKills:  1,
		redisKills: 1,
		outage:     10 * time.Minute,
		think:      250 * time.Millisecond,
		seed:       uint64(envInt("ENGRAM_CHAOS_SEED", int(time.Now().UnixNano()%1e9))),
	}
	outage := "ENGRAM_CHAOS_OUTAGE"
	if clustered {
		p.turns = envInt("ENGRAM_CHAOS_CLUSTER_TURNS", 6000)
		p.kills = envInt("ENGRAM_CHAOS_CLUSTER_KILLS", 30)
		p.natsKills = envInt("ENGRAM_CHAOS_CLUSTER_NATS_KILLS", 4)
		p.redisKills = envInt("ENGRAM_CHAOS_CLUSTER_REDIS_KILLS", 3)
		p.outage = 2 * time.Minute
		outage = "ENGRAM_CHAOS_CLUSTER_OUTAGE"
	}
	if d, err := time.ParseDuration(os.Getenv(outage)); err == nil && (d > 0 || clustered && d == 0) {
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
	infra         []*infraKill // the NATS and Redis kills
	injectorKills []time.Time  // when an injector was killed
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

// TestChaos is the multi-process end-to-end suite with chaos (package doc)
// on a single nats-server and a single redis-server.
func TestChaos(tt *testing.T) {
	if os.Getenv("ENGRAM_CHAOS") == "" {
		tt.Skip("the multi-process chaos suite runs with ENGRAM_CHAOS=1: make chaos (scripts/chaos.sh)")
	}
	runSuite(tt, false, os.Getenv("ENGRAM_CHAOS_REPORT"))
}

// TestChaosCluster is the suite on clusters (package doc, "The clustered
// run"): a JetStream cluster of three with every stream, consumer and the
// activity bucket replicated three times, and a Redis Cluster of three
// primaries each with a replica; NATS nodes (the stream leader first) and
// Redis primaries are killed -9 during the replay.
func TestChaosCluster(tt *testing.T) {
	if os.Getenv("ENGRAM_CHAOS") == "" {
		tt.Skip("the multi-process chaos suite runs with ENGRAM_CHAOS=1: make chaos (scripts/chaos.sh)")
	}
	runSuite(tt, true, os.Getenv("ENGRAM_CHAOS_CLUSTER_REPORT"))
}

// infraQuiet is how long after a killed NATS node or Redis server is back
// the chaos loop kills no worker, so that the turns late in that window
// are the infrastructure kill's.
const infraQuiet = 10 * time.Second

func runSuite(tt *testing.T, clustered bool, reportFile string) {
	t := &recT{T: tt}
	defer t.summary()
	p := loadParams(clustered)
	name := "single"
	if clustered {
		name = "cluster"
	}
	t.Logf("chaos (%s): %d turns (%d per session, %d clients, %v between a block and turn_ended), %d kills, %d NATS kills, %d Redis kills, model outage %v, seed %d",
		name, p.turns, p.perSession, p.clients, p.think, p.kills, p.natsKills, p.redisKills, p.outage, p.seed)
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()

	c := newCluster(tt, name, clustered)
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
	if clustered {
		c.checkReplicas(ctx, t, false)
	}

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
	limit := 15 * time.Minute
	if dl, ok := tt.Deadline(); ok {
		// Fail with the report and stop every process before go test's
		// timeout would kill the test binary and leave them running.
		limit = min(limit, time.Until(dl)-2*time.Minute)
	}
	state, err := c.waitDrained(ctx, 3*idleQuiet, limit)
	if err != nil {
		dumpTails(t, c)
		for _, e := range log.events {
			t.Log("chaos: " + e)
		}
		t.Fatalf("drain: %v", err)
	}
	t.Logf("drained in %v: %s", time.Since(drainStart).Round(time.Second), state)
	if clustered {
		// Every replica back and current after the kills.
		c.checkReplicas(ctx, t, true)
	}

	// 4. The checks.
	r := check(ctx, t, c, d, warm, log.injectorKills)
	r.Clustered, r.NATSNodes, r.RedisNodes = clustered, len(c.natsNodes), len(c.redisNodes)
	r.Turns, r.Kills, r.KillsByRole = len(d.turns), log.totalKills(), log.kills
	r.Infra, r.LateElsewhere = log.infra, attributeLate(t, d, log.infra, replayStart, d.injectTimeout)
	for _, ik := range log.infra {
		switch ik.Kind {
		case "nats":
			r.NATSRestarts++
			r.NATSDown = ik.Down
		case "redis":
			r.RedisRestarts++
			r.RedisDown = ik.Down
		}
	}
	r.ModelOutage = log.outage.String()
	r.Wall, r.Replay = time.Since(t0).Round(time.Second).String(), replayWall.Round(time.Second).String()
	r.Seed, r.StartFailures, r.KillsDuringDrain = p.seed, log.startFailures, log.killedLate
	r.Model = c.modelStats()
	if err := d.dump(c.path("turns.tsv")); err != nil {
		t.Error(err)
	}
	out, _ := json.MarshalIndent(r, "", "  ")
	t.Logf("report:\n%s", out)
	for _, e := range log.events {
		t.Log("chaos: " + e)
	}
	if reportFile != "" {
		if err := os.WriteFile(reportFile, append(out, '\n'), 0o644); err != nil {
			t.Error(err)
		}
	}
	if r.Kills < min(p.kills, 50) {
		t.Errorf("only %d kills, want at least %d", r.Kills, min(p.kills, 50))
	}
	if r.NATSRestarts != p.natsKills || r.RedisRestarts != p.redisKills {
		t.Errorf("%d NATS and %d Redis kills, want %d and %d", r.NATSRestarts, r.RedisRestarts, p.natsKills, p.redisKills)
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
// (p.kills in all, the last ones possibly during the drain), kills NATS
// and Redis (single servers: at 30% and 50% of the turns; clusters:
// p.natsKills nodes and p.redisKills primaries, alternating, from 10% to
// 60%), and takes the model down at 65% for p.outage (first half
// connection refused, second half 503).
//
// The NATS and Redis kills run one after the other in a goroutine of
// their own, each followed by infraQuiet before the next, so that their
// windows do not overlap; the worker kills go on meanwhile, but spare the
// injectors from an ack wait before such a kill until infraQuiet after
// it, so that the turns late in its window are the node's.
func runChaos(ctx context.Context, t *recT, c *cluster, d *driver, p params, rng *rand.Rand, log *chaosLog, warm []*turnRec, replayDone <-chan struct{}) {
	base := int64(len(warm))
	total := int64(p.turns)
	progress := func() int64 {
		select {
		case <-replayDone:
			return total // the rest happen during the drain
		default:
			return d.done.Load() - base
		}
	}
	points := make([]int64, p.kills)
	for i := range points {
		points[i] = int64(float64(total) * (0.02 + 0.93*rng.Float64()))
	}
	sort.Slice(points, func(i, j int) bool { return points[i] < points[j] })
	// The infrastructure kills' own random source (rng is the worker loop's).
	irng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	var inWindow atomic.Bool
	infraDone := make(chan struct{})
	go func() {
		defer close(infraDone)
		natsK, redisK := 0, 0
		redisKilled := map[string]bool{}
		for _, m := range infraMilestones(c.clustered, p, total) {
			for progress() < m.at {
				select {
				case <-ctx.Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
			// No injector is killed from an ack wait before the kill (its
			// events come back after it) until infraQuiet after the node
			// is back: the turns late in the window are the node's.
			inWindow.Store(true)
			time.Sleep(ackWait + 2*time.Second)
			at := progress()
			down := 3*time.Second + time.Duration(irng.IntN(3000))*time.Millisecond
			ik := &infraKill{Kind: m.name, AtTurn: at}
			log.mu.Lock()
			log.infra = append(log.infra, ik)
			log.mu.Unlock()
			switch {
			case m.name == "nats" && c.clustered:
				c.killNATSCluster(ctx, t, natsK, down, ik)
				natsK++
			case m.name == "redis" && c.clustered:
				c.killRedisPrimary(ctx, t, redisK, down, redisKilled, ik)
				redisK++
			default:
				n := c.natsNodes[0].p
				start := func() { c.startNATS(ctx, c.natsNodes[0]) }
				if m.name == "redis" {
					n, start = c.redisNodes[0].p, func() { c.startRedis(ctx, c.redisNodes[0]) }
				}
				ik.Node, ik.at = n.name, time.Now()
				n.kill()
				time.Sleep(down)
				start()
				ik.restarted = time.Now()
				ik.recovered = ik.restarted
				ik.Down, ik.Recovered = ik.restarted.Sub(ik.at).Round(10*time.Millisecond).String(), "0s"
			}
			ik.At = ik.at.Format("15:04:05.000")
			target := ""
			if ik.Target != "" {
				target = ": " + ik.Target
			}
			log.add("kill -9 %s (%s%s) at turn %d, %s: down %s, failover %s, healthy %s after its restart; led %v",
				ik.Node, m.name, target, at, ik.At, ik.Down, ik.Failover, ik.Recovered, ik.Led)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(ik.recovered.Add(infraQuiet))):
			}
			inWindow.Store(false)
		}
	}()

	outageDone := make(chan struct{})
	outageAt := int64(-1)
	if p.outage > 0 {
		outageAt = total * 65 / 100
	} else {
		close(outageDone)
	}
	next := 0
	for next < len(points) || outageAt >= 0 {
		pr := progress()
		if outageAt >= 0 && pr >= outageAt {
			outageAt = -1
			log.add("model down at turn %d for %v", pr, p.outage)
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
		if next < len(points) && pr >= points[next] {
			var running []*proc
			spare := inWindow.Load()
			for _, w := range c.workers {
				if !w.exited() && !(spare && strings.HasPrefix(w.name, "injector")) {
					running = append(running, w)
				}
			}
			if len(running) > 0 {
				victim := running[rng.IntN(len(running))]
				killedAt := time.Now()
				if victim.kill() {
					log.mu.Lock()
					log.kills[strings.SplitN(victim.name, "-", 2)[0]]++
					if strings.HasPrefix(victim.name, "injector") {
						log.injectorKills = append(log.injectorKills, killedAt)
					}
					if pr >= total {
						log.killedLate++
					}
					log.mu.Unlock()
					log.add("kill -9 %s at turn %d", victim.name, pr)
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
	// The replay may end first: keep supervising until the NATS and Redis
	// kills are done and the model is back.
	for _, ch := range []chan struct{}{infraDone, outageDone} {
		for waiting := true; waiting; {
			select {
			case <-ch:
				waiting = false
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			supervise(t, c, log)
		}
	}
}

// infraMilestones places the NATS and Redis kills on the replay: single
// servers, NATS at 30% and Redis at 50%; clusters, the NATS and Redis
// kills alternating (NATS first) evenly from 10% to 60% (each waits for
// the window of the one before: they may come later).
func infraMilestones(clustered bool, p params, total int64) []*milestone {
	var ms []*milestone
	if !clustered {
		ms = []*milestone{{at: total * 30 / 100, name: "nats"}, {at: total * 50 / 100, name: "redis"}}
	} else {
		var kinds []string
		for i := 0; i < max(p.natsKills, p.redisKills); i++ {
			if i < p.natsKills {
				kinds = append(kinds, "nats")
			}
			if i < p.redisKills {
				kinds = append(kinds, "redis")
			}
		}
		for i, k := range kinds {
			frac := 0.5
			if len(kinds) > 1 {
				frac = 0.1 + 0.5*float64(i)/float64(len(kinds)-1)
			}
			ms = append(ms, &milestone{at: int64(float64(total) * frac), name: k})
		}
	}
	return ms
}

// infraKill is one kill -9 of a NATS node or a Redis server, for the
// report: what it was, how long the cluster took to replace it, and what
// the platform saw in its window (attributeLate): the turns that got no
// block before their reply deadline, and how long publishing was held up.
type infraKill struct {
	Kind   string   `json:"kind"` // nats | redis
	Node   string   `json:"node"`
	At     string   `json:"at"`               // the time of the kill
	Target string   `json:"target,omitempty"` // clusters: what the kill aimed at
	Led    []string `json:"led,omitempty"`    // NATS: what the node led when killed; Redis: its replica
	AtTurn int64    `json:"at_turn"`
	Down   string   `json:"down"` // killed -> restarted
	// Failover: clusters only, from the kill until a new leader of the
	// target was elected (NATS) or the primary's replica took over its
	// slots with the cluster ok (Redis).
	Failover string `json:"failover,omitempty"`
	// Recovered: restarted -> healthy again (NATS /healthz: caught up;
	// Redis: every node ok, every primary with its replica in sync).
	Recovered string `json:"recovered"`
	Turns     int    `json:"turns_in_window"`
	Late      int    `json:"turns_late"` // no block before the reply deadline
	// LateStarted: when the late turns started, relative to the kill
	// ("-120ms to 3.5s": the first was in flight when the node died).
	LateStarted string `json:"late_turns_started,omitempty"`
	// LongestPause: the longest time in the window between two
	// turn_started publishes of the platform (8 clients; a few hundred
	// milliseconds normally): how long publishing was held up.
	LongestPause string `json:"longest_pause_between_turns"`
	// LongestWithoutBlock: the longest time in the window in which no
	// block reached the platform in time (a few hundred milliseconds
	// normally): the failover as the injector's clients saw it.
	LongestWithoutBlock string `json:"longest_without_a_block"`
	PublishRetried      int    `json:"turns_publish_retried"` // turns of the window with a publish the bus refused or left unanswered (repeated)

	at, restarted, recovered time.Time
}

// attributeLate counts, for each infrastructure kill, the turns of its
// window and the late ones, finds the platform's longest pause between
// two turn_started publishes in it, and returns the late turns outside
// every window (the worker kills', the outage's and the machine's). A
// window runs from the reply deadline before the kill (a turn in flight
// when the node died is the kill's) to infraQuiet after the node was
// healthy again.
func attributeLate(t *recT, d *driver, infra []*infraKill, replayStart time.Time, deadline time.Duration) int {
	elsewhere := 0
	starts, answers := map[*infraKill][]time.Time{}, map[*infraKill][]time.Time{}
	firstLate := map[*infraKill]time.Duration{}
	lastLate := map[*infraKill]time.Duration{}
	for _, tr := range d.turns {
		if tr.started.Before(replayStart) {
			continue
		}
		var in *infraKill
		for _, ik := range infra {
			if !ik.at.IsZero() && !tr.started.Before(ik.at.Add(-deadline)) && tr.started.Before(ik.recovered.Add(infraQuiet)) {
				in = ik
				break
			}
		}
		if in == nil {
			if !tr.replied {
				elsewhere++
			}
			continue
		}
		in.Turns++
		starts[in] = append(starts[in], tr.started)
		if tr.publishRetries > 0 {
			in.PublishRetried++
		}
		if tr.replied {
			answers[in] = append(answers[in], tr.repliedAt)
			continue
		}
		in.Late++
		after := tr.started.Sub(in.at)
		if in.Late <= 12 {
			d.mu.Lock()
			answers := len(d.answers[tr.startedID])
			d.mu.Unlock()
			t.Logf("late in the window of %s %s: turn %s/%s started %v after the kill, %d publishes repeated, %d answers after the deadline",
				in.Kind, in.Node, tr.session, tr.turn, after.Round(10*time.Millisecond), tr.publishRetries, answers)
		}
		if f, ok := firstLate[in]; !ok || after < f {
			firstLate[in] = after
		}
		if l, ok := lastLate[in]; !ok || after > l {
			lastLate[in] = after
		}
	}
	for _, ik := range infra {
		if f, ok := firstLate[ik]; ok {
			ik.LateStarted = fmt.Sprintf("%v to %v", f.Round(10*time.Millisecond), lastLate[ik].Round(10*time.Millisecond))
		}
		ik.LongestPause = longestGap(starts[ik]).Round(10 * time.Millisecond).String()
		ik.LongestWithoutBlock = longestGap(answers[ik]).Round(10 * time.Millisecond).String()
	}
	return elsewhere
}

// longestGap is the longest time between two consecutive instants of ts.
func longestGap(ts []time.Time) time.Duration {
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	var gap time.Duration
	for i := 1; i < len(ts); i++ {
		gap = max(gap, ts[i].Sub(ts[i-1]))
	}
	return gap
}

type milestone struct {
	at   int64
	name string
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
