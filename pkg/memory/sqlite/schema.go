package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations are applied in order; PRAGMA user_version records how many ran.
// Never edit a released migration: append a new one.
var migrations = []string{
	// 1: nodes, paths, edges, per-session records.
	`
CREATE TABLE nodes (
	rid       INTEGER PRIMARY KEY,
	id        TEXT NOT NULL UNIQUE,
	project   TEXT NOT NULL,
	digest    TEXT NOT NULL,
	doc       BLOB NOT NULL           -- the node as JSON, without the embedding
);
CREATE UNIQUE INDEX nodes_digest ON nodes(project, digest);

-- vectors apart from the nodes: a 1.5 KB blob next to each document would
-- leave most of every page unused
CREATE TABLE node_vectors (
	rid   INTEGER PRIMARY KEY REFERENCES nodes(rid) ON DELETE CASCADE,
	model TEXT NOT NULL,
	emb   BLOB NOT NULL                -- float32 little-endian
);

CREATE TABLE node_paths (
	path TEXT NOT NULL,
	rid  INTEGER NOT NULL REFERENCES nodes(rid) ON DELETE CASCADE,
	PRIMARY KEY (path, rid)
) WITHOUT ROWID;
CREATE INDEX node_paths_rid ON node_paths(rid);

CREATE TABLE edges (
	eid        INTEGER PRIMARY KEY,
	src        TEXT NOT NULL,
	dst        TEXT NOT NULL,
	relation   TEXT NOT NULL,
	weight     REAL NOT NULL,
	source     TEXT NOT NULL,
	valid_from INTEGER NOT NULL,
	valid_to   INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX edges_live ON edges(src, dst, relation) WHERE valid_to = 0;
CREATE INDEX edges_src ON edges(src, valid_to);
CREATE INDEX edges_dst ON edges(dst, valid_to);

CREATE TABLE turns (
	project TEXT NOT NULL, session TEXT NOT NULL, turn_id TEXT NOT NULL,
	PRIMARY KEY (project, session, turn_id)
) WITHOUT ROWID;
CREATE TABLE messages (
	project TEXT NOT NULL, session TEXT NOT NULL, id INTEGER NOT NULL,
	turn_id TEXT NOT NULL, doc BLOB NOT NULL,
	PRIMARY KEY (project, session, id)
) WITHOUT ROWID;
CREATE INDEX messages_turn ON messages(project, session, turn_id);
CREATE TABLE summaries (
	seq INTEGER PRIMARY KEY, project TEXT NOT NULL, session TEXT NOT NULL, doc BLOB NOT NULL
);
CREATE INDEX summaries_session ON summaries(project, session, seq);
CREATE TABLE cursors (
	project TEXT NOT NULL, session TEXT NOT NULL, value INTEGER NOT NULL,
	PRIMARY KEY (project, session)
) WITHOUT ROWID;
CREATE TABLE injections (
	project TEXT NOT NULL, session TEXT NOT NULL, turn_id TEXT NOT NULL, ids BLOB NOT NULL,
	PRIMARY KEY (project, session, turn_id)
) WITHOUT ROWID;
CREATE TABLE briefs (
	project TEXT NOT NULL, session TEXT NOT NULL, expires INTEGER NOT NULL,
	PRIMARY KEY (project, session)
) WITHOUT ROWID;
CREATE TABLE leases (
	project TEXT NOT NULL, session TEXT NOT NULL, name TEXT NOT NULL,
	owner TEXT NOT NULL, expires INTEGER NOT NULL,
	PRIMARY KEY (project, session, name)
) WITHOUT ROWID;
CREATE TABLE processed (
	project TEXT NOT NULL, consumer TEXT NOT NULL, event TEXT NOT NULL, expires INTEGER NOT NULL,
	PRIMARY KEY (project, consumer, event)
) WITHOUT ROWID;
CREATE INDEX processed_expires ON processed(expires) WHERE expires > 0;
`,
	// 2: consolidation pass journals (journal.go).
	`
CREATE TABLE passes (
	project TEXT NOT NULL, id TEXT NOT NULL, session TEXT NOT NULL, status TEXT NOT NULL,
	started INTEGER NOT NULL, doc BLOB NOT NULL,
	PRIMARY KEY (project, id)
) WITHOUT ROWID;
CREATE INDEX passes_session ON passes(project, session, started);
CREATE INDEX passes_id ON passes(id);
`,
	// 3: tenants. Every record gains the tenant it belongs to; what was
	// stored before is the default tenant's (''). The node digest is unique
	// per tenant and project; the per-session tables, whose primary keys
	// cannot be altered in place, are copied into tables keyed by tenant.
	`
ALTER TABLE nodes ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
DROP INDEX nodes_digest;
CREATE UNIQUE INDEX nodes_digest ON nodes(tenant, project, digest);

CREATE TABLE turns_t (
	tenant TEXT NOT NULL, project TEXT NOT NULL, session TEXT NOT NULL, turn_id TEXT NOT NULL,
	PRIMARY KEY (tenant, project, session, turn_id)
) WITHOUT ROWID;
INSERT INTO turns_t SELECT '', project, session, turn_id FROM turns;
DROP TABLE turns;
ALTER TABLE turns_t RENAME TO turns;

CREATE TABLE messages_t (
	tenant TEXT NOT NULL, project TEXT NOT NULL, session TEXT NOT NULL, id INTEGER NOT NULL,
	turn_id TEXT NOT NULL, doc BLOB NOT NULL,
	PRIMARY KEY (tenant, project, session, id)
) WITHOUT ROWID;
INSERT INTO messages_t SELECT '', project, session, id, turn_id, doc FROM messages;
DROP TABLE messages;
ALTER TABLE messages_t RENAME TO messages;
CREATE INDEX messages_turn ON messages(tenant, project, session, turn_id);

ALTER TABLE summaries ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
DROP INDEX summaries_session;
CREATE INDEX summaries_session ON summaries(tenant, project, session, seq);

CREATE TABLE cursors_t (
	tenant TEXT NOT NULL, project TEXT NOT NULL, session TEXT NOT NULL, value INTEGER NOT NULL,
	PRIMARY KEY (tenant, project, session)
) WITHOUT ROWID;
INSERT INTO cursors_t SELECT '', project, session, value FROM cursors;
DROP TABLE cursors;
ALTER TABLE cursors_t RENAME TO cursors;

CREATE TABLE injections_t (
	tenant TEXT NOT NULL, project TEXT NOT NULL, session TEXT NOT NULL, turn_id TEXT NOT NULL, ids BLOB NOT NULL,
	PRIMARY KEY (tenant, project, session, turn_id)
) WITHOUT ROWID;
INSERT INTO injections_t SELECT '', project, session, turn_id, ids FROM injections;
DROP TABLE injections;
ALTER TABLE injections_t RENAME TO injections;

CREATE TABLE briefs_t (
	tenant TEXT NOT NULL, project TEXT NOT NULL, session TEXT NOT NULL, expires INTEGER NOT NULL,
	PRIMARY KEY (tenant, project, session)
) WITHOUT ROWID;
INSERT INTO briefs_t SELECT '', project, session, expires FROM briefs;
DROP TABLE briefs;
ALTER TABLE briefs_t RENAME TO briefs;

CREATE TABLE leases_t (
	tenant TEXT NOT NULL, project TEXT NOT NULL, session TEXT NOT NULL, name TEXT NOT NULL,
	owner TEXT NOT NULL, expires INTEGER NOT NULL,
	PRIMARY KEY (tenant, project, session, name)
) WITHOUT ROWID;
INSERT INTO leases_t SELECT '', project, session, name, owner, expires FROM leases;
DROP TABLE leases;
ALTER TABLE leases_t RENAME TO leases;

CREATE TABLE processed_t (
	tenant TEXT NOT NULL, project TEXT NOT NULL, consumer TEXT NOT NULL, event TEXT NOT NULL, expires INTEGER NOT NULL,
	PRIMARY KEY (tenant, project, consumer, event)
) WITHOUT ROWID;
INSERT INTO processed_t SELECT '', project, consumer, event, expires FROM processed;
DROP TABLE processed;
ALTER TABLE processed_t RENAME TO processed;
CREATE INDEX processed_expires ON processed(expires) WHERE expires > 0;

CREATE TABLE passes_t (
	tenant TEXT NOT NULL, project TEXT NOT NULL, id TEXT NOT NULL, session TEXT NOT NULL, status TEXT NOT NULL,
	started INTEGER NOT NULL, doc BLOB NOT NULL,
	PRIMARY KEY (tenant, project, id)
) WITHOUT ROWID;
INSERT INTO passes_t SELECT '', project, id, session, status, started, doc FROM passes;
DROP TABLE passes;
ALTER TABLE passes_t RENAME TO passes;
CREATE INDEX passes_session ON passes(tenant, project, session, started);
CREATE INDEX passes_id ON passes(id);
`,
	// 4: injection records hold the answered block (the ids column holds
	// the memory.Injection document) and expire.
	`
ALTER TABLE injections ADD COLUMN expires INTEGER NOT NULL DEFAULT 0;
CREATE INDEX injections_expires ON injections(expires) WHERE expires > 0;
`,
	// 5: dead letters the dead-letter stream refused, until it takes them
	// (memory.Letters).
	`
CREATE TABLE parked_letters (
	seq    INTEGER PRIMARY KEY,
	key    TEXT NOT NULL UNIQUE,
	parked INTEGER NOT NULL,
	data   BLOB NOT NULL
);
`,
}

// SchemaVersion is the version of the schema this binary writes (PRAGMA
// user_version): a file made by a binary of another version is migrated
// (older) or refused (newer). Caches of prepared files key on it.
func SchemaVersion() int { return len(migrations) }

// migrate brings the schema up to date in one transaction per migration.
func migrate(ctx context.Context, db *sql.DB) error {
	var version int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this binary knows (%d)", version, len(migrations))
	}
	for v := version; v < len(migrations); v++ {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, v+1)); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
	}
	return nil
}
