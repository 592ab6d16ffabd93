-- 0003: runtime evidence. Outcome reports are append-only facts; node_stats is derived from
-- them (rewritten for a node in the same transaction as each report) and can be rebuilt.

CREATE TABLE feedback (
    id                INTEGER PRIMARY KEY,
    node_id           TEXT NOT NULL REFERENCES nodes (id),
    node_version      TEXT,
    solution_id       TEXT NOT NULL,
    solution_revision INTEGER NOT NULL CHECK (solution_revision >= 1),
    outcome           TEXT NOT NULL CHECK (outcome IN ('solved', 'failed', 'env_mismatch', 'dangerous')),
    cluster           TEXT NOT NULL,  -- os|runtime_major|pkg_manager
    environment       TEXT NOT NULL,  -- JSON: the environment as parsed
    agent_id          TEXT,           -- NULL: anonymous, recorded but never a second vote
    model             TEXT,
    ip_hash           TEXT,           -- keyed hash of the client address; raw addresses are never stored
    reason            TEXT,
    note              TEXT,
    evidence_hash     TEXT,           -- SHA-256 of the canonical evidence object
    exit_code         INTEGER,
    created_at        TEXT NOT NULL
);
CREATE INDEX feedback_by_node ON feedback (node_id, solution_id, solution_revision, cluster, created_at);
CREATE UNIQUE INDEX feedback_once_per_agent
    ON feedback (agent_id, node_id, solution_id, solution_revision, cluster) WHERE agent_id IS NOT NULL;
CREATE TRIGGER feedback_immutable BEFORE UPDATE ON feedback
BEGIN SELECT RAISE(ABORT, 'feedback rows are immutable'); END;

-- One row per (node, solution, revision, cluster); solution_id '' with revision 0 is the
-- node-wide aggregate, cluster '' the global row of each.
CREATE TABLE node_stats (
    node_id           TEXT NOT NULL REFERENCES nodes (id),
    solution_id       TEXT NOT NULL,
    solution_revision INTEGER NOT NULL,
    cluster           TEXT NOT NULL,
    solved            REAL NOT NULL,  -- decayed, weighted counts
    failed            REAL NOT NULL,
    sample_size       INTEGER NOT NULL,
    success_score     REAL NOT NULL,
    failure_state     TEXT NOT NULL,
    answer_state      TEXT NOT NULL,
    solved_agents     INTEGER NOT NULL,
    failed_agents     INTEGER NOT NULL,
    last_verified     TEXT,
    updated_at        TEXT NOT NULL,
    PRIMARY KEY (node_id, solution_id, solution_revision, cluster)
) WITHOUT ROWID;

-- Approaches that did not work while no answer applied (protocol section 5). Kept forever;
-- archived (hidden from ordinary reads) once a matching answer is published.
CREATE TABLE failures (
    id           INTEGER PRIMARY KEY,
    node_id      TEXT NOT NULL REFERENCES nodes (id),
    environment  TEXT NOT NULL,  -- JSON: the environment as parsed
    cluster      TEXT NOT NULL,
    summary      TEXT NOT NULL,
    steps        TEXT NOT NULL,  -- JSON array of the commands tried
    reason       TEXT NOT NULL,
    agent_id     TEXT,
    model        TEXT,
    ip_hash      TEXT,
    created_at   TEXT NOT NULL,
    archived_at  TEXT,
    archived_by  TEXT REFERENCES article_revisions (revision_id)
);
CREATE INDEX failures_by_node ON failures (node_id, archived_at);

-- Submissions per hour per agent or hashed address (POST /v1/nodes, feedback, failures, issues).
CREATE TABLE write_counts (
    subject TEXT NOT NULL,  -- 'agent:<id>' or 'ip:<keyed hash>'
    hour    TEXT NOT NULL,  -- UTC hour, e.g. 2026-11-29T21
    count   INTEGER NOT NULL,
    PRIMARY KEY (subject, hour)
) WITHOUT ROWID;

-- Suspected duplicate pairs, settled by votes of distinct agents (protocol section 6).
CREATE TABLE dedupe_tasks (
    id           INTEGER PRIMARY KEY,
    node_id      TEXT NOT NULL REFERENCES nodes (id),
    candidate_id TEXT NOT NULL REFERENCES nodes (id),
    reason       TEXT,
    created_by   TEXT,
    status       TEXT NOT NULL CHECK (status IN ('open', 'flagged', 'closed')),
    canonical_id TEXT,  -- set when two `same` votes agree on it: flagged for an administrator
    created_at   TEXT NOT NULL,
    UNIQUE (node_id, candidate_id)
);
CREATE TABLE dedupe_votes (
    task_id      INTEGER NOT NULL REFERENCES dedupe_tasks (id),
    agent_id     TEXT NOT NULL,
    vote         TEXT NOT NULL CHECK (vote IN ('same', 'different')),
    canonical_id TEXT,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (task_id, agent_id)
);

-- An anonymous reporter repeating itself (same hashed address) is refused like a named one.
CREATE UNIQUE INDEX feedback_once_per_address
    ON feedback (ip_hash, node_id, solution_id, solution_revision, cluster) WHERE agent_id IS NULL AND ip_hash IS NOT NULL;
