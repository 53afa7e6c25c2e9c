// Package idle is the idle detector: it notices sessions that have gone
// quiet and publishes session_idle for them, which starts the consolidator's
// pass over the conversation.
//
// Activity comes from input events (turn_started, turn_ended,
// tokens_reported) read by a durable consumer of its own on ENGRAM_IN
// (ConsumerConfig; Run consumes it) or fed directly with Observe. The time of
// an activity is the stream's timestamp of the message, so platform clocks do
// not matter. The session is the body's (project_id, session_id), and only
// when the subject names the same: an event published on another project's
// subject, or an undecodable one, records no activity (issue 23).
//
// State lives in a JetStream key-value bucket (ENGRAM_ACTIVITY by default),
// one key per project and session, so that it survives restarts and is shared
// by every replica:
//
//	{"project":..., "session":..., "last":<last activity>, "idle_for":<activity an idle event was published for>,
//	 "claim":{"for":..., "owner":..., "at":...}}
//
// A sweep (every Options.Sweep) publishes session_idle for each session
// quiet for Options.Quiet whose last activity is after idle_for. Replicas
// coordinate through the bucket's revisions: a replica first claims the
// session with a compare-and-set update (only one wins), publishes, then
// records idle_for. The event id (and so Nats-Msg-Id) is derived from the
// project, session and activity time, so a publish repeated after a crash is
// dropped by the stream's duplicate window; a claim holds against every
// sweep, its owner's included, and one whose owner died (or whose publish
// failed) expires after Options.ClaimTTL, when any replica takes over.
//
// The detector never logs; errors of the background loops go to
// Options.OnError. Time comes from Options.Clock, which tests control.
package idle
