package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Injector lanes: consumers of turn_started, each filtered on a few
// tenants, beside the injector's own consumer (which sees every tenant).
//
// A JetStream consumer delivers in stream order. With one consumer for
// every tenant, a tenant that publishes turns faster than the injector can
// even pull and acknowledge them (a flood: 50 sessions x 1,000 turns
// arrive at about twice the pull rate on a 2-core machine) puts every other
// tenant's next turn behind its backlog, however fairly the runner serves
// what it has pulled. A lane gives a tenant its own position in the
// stream: the server filters by subject (its per-subject index), so a
// tenant's lane holds only that tenant's turns and another tenant's flood
// is never in front of them.
//
// Lanes are fixed names (InjectorLanes of them, so that the NATS
// permissions of the injector and setup roles can list them), created by
// setup for the named tenants of the deployment (the tenants file) and the
// default tenant; beyond InjectorLanes-1 named tenants they share lanes.
// The injector's own consumer stays and covers everything (tenants without
// a lane, events stored before a lane existed): its runner acknowledges at
// once, without handling, what a lane it pulls will deliver (see
// internal/runner WithLanes). Nothing is ever taken out of a lane once
// placed there (see PlanLanes), so no event falls between two lanes.
const InjectorLanes = 16

// DefaultLaneWindow is a lane's MaxAckPending: what the injector holds of
// one lane at once.
const DefaultLaneWindow = 1024

// LaneName is the consumer name of injector lane i (0 <= i < InjectorLanes):
// injector-lane-00 ... injector-lane-15. Lane 0 is the default tenant's.
func LaneName(i int) string { return fmt.Sprintf("%s-lane-%02d", ConsumerInjector, i) }

// LaneNames are the names of every injector lane, in order.
func LaneNames() []string {
	out := make([]string, InjectorLanes)
	for i := range out {
		out[i] = LaneName(i)
	}
	return out
}

// InTypeTenant is the subject pattern of one input type and tenant as
// ENGRAM_IN stores it: <prefix>.in.<type>.<tenant>.*.* (a lane's filter).
func (s Subjects) InTypeTenant(t Type, tenant string) string {
	return s.prefix() + ".in." + string(t) + "." + EncodeToken(tenant) + ".*.*"
}

// LaneTenant is the tenant of a lane's filter subject (InTypeTenant of
// turn_started); ok is false for any other subject.
func (s Subjects) LaneTenant(filter string) (tenant string, ok bool) {
	rest, ok := strings.CutPrefix(filter, s.prefix()+".in."+string(TypeTurnStarted)+".")
	if !ok {
		return "", false
	}
	tok, ok := strings.CutSuffix(rest, ".*.*")
	if !ok || tok == "" || strings.ContainsAny(tok, ".*> ") {
		return "", false
	}
	t, err := DecodeToken(tok)
	if err != nil {
		return "", false
	}
	return t, true
}

// PlanLanes places tenants in lanes: the default tenant ("") in lane 0,
// and each tenant in no lane yet into the lane of 1..InjectorLanes-1 that
// holds the fewest (the lowest index on a tie). Lanes only grow: every
// tenant already in a lane (current, lane index to tenants) stays where it
// is, also when it is no longer wanted (a removed tenant has no
// credentials left; its filter costs nothing) or when a race of two setups
// placed it twice. Narrowing a lane would lose turns: the injector's own
// consumer acknowledges a turn as the lane's until the injector sees the
// change, and the lane no longer delivers it.
func PlanLanes(current map[int][]string, tenants []string) map[int][]string {
	plan := map[int][]string{}
	placed := map[string]bool{}
	for i := range InjectorLanes {
		for _, t := range current[i] {
			if !slices.Contains(plan[i], t) {
				plan[i] = append(plan[i], t)
			}
			placed[t] = true
		}
	}
	if !placed[""] {
		plan[0] = append(plan[0], "")
		placed[""] = true
	}
	rest := make([]string, 0, len(tenants))
	for _, t := range tenants {
		if !placed[t] {
			rest = append(rest, t)
			placed[t] = true
		}
	}
	slices.Sort(rest)
	for _, t := range rest {
		best := 1
		for i := 2; i < InjectorLanes; i++ {
			if len(plan[i]) < len(plan[best]) {
				best = i
			}
		}
		plan[best] = append(plan[best], t)
	}
	for i := range plan {
		slices.Sort(plan[i])
	}
	return plan
}

// LaneConsumerConfig is the JetStream configuration of lane name holding
// tenants: the injector's, filtered on their turn_started subjects.
func (t Topology) LaneConsumerConfig(name string, tenants []string) jetstream.ConsumerConfig {
	base, _ := t.Consumer(ConsumerInjector)
	base.Name = name
	base.MaxAckPending = DefaultLaneWindow
	cc := t.JetStreamConsumerConfig(base)
	cc.Description = "Engram injector lane (" + strings.Join(laneLabels(tenants), ", ") + ")"
	cc.FilterSubject, cc.FilterSubjects = "", nil
	for _, tenant := range tenants {
		cc.FilterSubjects = append(cc.FilterSubjects, t.Subjects().InTypeTenant(TypeTurnStarted, tenant))
	}
	return cc
}

func laneLabels(tenants []string) []string {
	out := make([]string, len(tenants))
	for i, t := range tenants {
		out[i] = EncodeToken(t)
	}
	return out
}

// CurrentLanes reads the lanes that exist on t's input stream: lane index
// to the tenants of its filter.
func CurrentLanes(ctx context.Context, js jetstream.JetStream, t Topology) (map[int][]string, error) {
	cur := map[int][]string{}
	for i, name := range LaneNames() {
		ts, err := laneTenants(ctx, js, t, name)
		if err != nil {
			return nil, err
		}
		if len(ts) > 0 {
			cur[i] = ts
		}
	}
	return cur, nil
}

// EnsureLanes places t.Lanes (the named tenants) and the default tenant in
// injector lanes (PlanLanes) and creates the lanes or adds tenants to them.
// It never removes a tenant from a lane nor deletes one (see PlanLanes);
// each lane is read again just before it is written and the write keeps
// what it holds then, so a setup running beside another one adds to its
// placements instead of undoing them. With no named tenants it does
// nothing: a single-tenant deployment has one consumer, as before lanes.
func EnsureLanes(ctx context.Context, js jetstream.JetStream, t Topology) error {
	if len(t.Lanes) == 0 {
		return nil
	}
	cur, err := CurrentLanes(ctx, js, t)
	if err != nil {
		return err
	}
	plan := PlanLanes(cur, t.Lanes)
	for i, name := range LaneNames() {
		if slices.Equal(cur[i], plan[i]) {
			continue
		}
		now, err := laneTenants(ctx, js, t, name)
		if err != nil {
			return err
		}
		for _, tenant := range now {
			if !slices.Contains(plan[i], tenant) {
				plan[i] = append(plan[i], tenant)
			}
		}
		slices.Sort(plan[i])
		if _, err := js.CreateOrUpdateConsumer(ctx, t.In.Name, t.LaneConsumerConfig(name, plan[i])); err != nil {
			return fmt.Errorf("events: ensure lane %s on %s: %w", name, t.In.Name, err)
		}
	}
	return nil
}

// laneTenants reads the tenants of one lane's filter (none when it does
// not exist).
func laneTenants(ctx context.Context, js jetstream.JetStream, t Topology, name string) ([]string, error) {
	c, err := js.Consumer(ctx, t.In.Name, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("events: lane %s: %w", name, err)
	}
	var out []string
	for _, f := range Filters(c.CachedInfo().Config) {
		if tenant, ok := t.Subjects().LaneTenant(f); ok {
			out = append(out, tenant)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Filters are a consumer's filter subjects, whichever field holds them
// (FilterSubject or FilterSubjects).
func Filters(cfg jetstream.ConsumerConfig) []string {
	if cfg.FilterSubject != "" {
		return append([]string{cfg.FilterSubject}, cfg.FilterSubjects...)
	}
	return slices.Clone(cfg.FilterSubjects)
}
