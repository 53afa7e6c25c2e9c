// Package console is the memory console: server-rendered pages where the
// people a memory is about, and the operator who runs Engram, see what it
// remembers, why a line was injected, review and undo what the background
// passes changed, and erase it.
//
// # Why a console, and why this shape
//
// Memory is about people, and it changes behind their backs: the extractor
// writes it from conversations, the consolidator revises and forgets it
// while they are away, the injector puts it in front of a model every
// turn. The command line shows all of that to an operator one command at
// a time; the people it is about need one place where "what does it know
// about me, and why did it say that?" has an answer, where a stale or
// duplicated memory is corrected, and where a background edit is reviewed
// and undone.
//
// The pages are rendered on the server (html/template, auto-escaped: every
// memory text is untrusted input) with one stylesheet and a few lines of
// script of our own, embedded with go:embed: nothing from a CDN, nothing
// to build, no Node at run time, and every page works without the script
// (it only asks before destructive changes). A single-page application
// would need an API surface and a build for what is a handful of
// read-mostly pages; html/template over the store's own reads is smaller
// and easier to keep secure. The edges of a memory are drawn as an inline
// SVG laid out on the server (a ring around the memory), which needs no
// graph library at this size (at most MaxGraphNeighbours; the table lists
// every edge).
//
// # The same rules as the memory tool
//
// A console that changed memory by rules of its own would be a second,
// weaker door. So the console logs people in with the memory tool's tokens
// file (mcptool.Tokens: a token is bound to one tenant and some or all of
// its projects) and opens and changes memories through the tool itself:
// mcptool.Tool.Load decides what a caller may see (another tenant's id, or
// another project's, is "not found" with the same words as an unknown id);
// edit, forget and restore are the tool's update, forget and restore
// operations, so an edit makes the text the agent's and never raises who
// asserted it, and a project token cannot change a global memory. Pin
// (Tool.Pin) is the one change the agent's tool does not offer: pinning
// makes a preference a standing instruction, a decision for the person.
// A search is the injector's own recall (memory.Retrieve with the
// injector's ranking, graph expansion and confidence floor), and is not
// counted as a use: looking at memory must not change how undo judges it.
//
// The operator logs in with the admin token the process generates into
// its data dir (console-admin.token, like the NATS credentials) or with
// the one-time login link `engram serve` keeps in the data dir
// (console-login: the ready line names the file, never the secret; each use
// writes the next one). The operator names any tenant and alone sees the
// operations pages: the streams hold every tenant's events.
//
// # Sessions and CSRF
//
// A login is a server-side session (an unguessable id in an HttpOnly,
// SameSite=Strict cookie, Secure when served over TLS) kept in the
// process: a restart logs everyone out, which costs a login and keeps no
// secret on disk. Every change is a POST that carries the session's CSRF
// token and, when the browser sends an Origin, comes from the console's
// own; the login form has a double-submitted token of its own. No page
// and no JSON endpoint answers without a session (a page redirects to the
// login, JSON is 401). Pages set a strict Content-Security-Policy (no
// inline script, nothing from elsewhere) and are not framed. A console on
// an address other than loopback must be served over TLS (config).
//
// # Background edits, reviewed
//
// A consolidation pass's journal (memory.Pass) is shown as a diff: the
// text before and after each change, the words removed and added marked
// (an LCS over words), and the model's reason. Undo is
// consolidate.Undo, what `engram memory undo` runs, within the page's
// tenant and project; its report (what was reverted, what was kept and
// why) is shown. A near-duplicate that remember held for review is
// journaled (memory.OpHold: the fact it would have stored, the memory it
// resembles, why) and waits in a queue: keep both (stored beside it),
// merge (stored as its revision, which closes the old one; restore can
// reopen it) or discard; the resolution is written into the journal
// entry, once the pass has finished (a running pass would write its
// journal over it) and, on a store with replicas (a Redis Cluster), once
// they hold the memory it stored: the memory's id entry is on another
// server than the journal, and a failover keeping one and losing the
// other would leave a resolved fact whose memory cannot be found by id
// (memory.SettleWritten; unconfirmed, the page says so and the fact
// stays open).
//
// # Erasure
//
// The erase page names a scope (a tenant, a project, a session), asks for
// it to be typed back, and erases it with the erase package (what `engram
// memory erase -verify` runs: the store, the streams' copies, the store's
// files purged, then everything read again for any text of the scope); the
// receipt is shown whole. A token erases within what it reaches (a whole
// tenant only with a token of every project); the operator anything. The
// console's own records (the change records, a held fact's resolution)
// are journal records and are erased with the scope's journals.
//
// # Turns, and why
//
// A session's page shows each turn's messages and the block injected into
// it, as the injection record keeps it, and for each line the memory, the
// rule that admitted it and, for a recalled line, each retrieval
// channel's rank, own score and share and the prior's parts; then the
// candidates the block policy cut. All of it is the record's
// (memory.Injection.Why, written by the injector when it answered the
// turn): a turn is explained as it was answered. A ranking run again now
// would read memory that has changed since (accesses move the recency
// prior, passes revise and forget), so a record that keeps no
// explanation (written before it was kept) is shown without one, and the
// page says so instead of recomputing.
//
// # Changes made by hand
//
// A change made through the console (edit, pin, forget, restore) is
// journaled as a change record: a memory.Pass with By naming who, one
// entry with the memory before and after. The memory's page lists it
// beside the consolidation passes' changes; the passes page leaves it out
// and undo refuses it (it is not a pass). The agent's own changes through
// the memory tool are logged by the tool, not journaled.
//
// # What a store may lack
//
// memory.Directory (a tenant's projects, a project's sessions with their
// sizes) and memory.Finder (a page of a filtered list in one pass) are
// optional: SQLite has both, Redis has Finder; without Directory the
// sessions page lists the session ids (Erasure.SessionIDs) and a token of
// every project names its project.
package console
