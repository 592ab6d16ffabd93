-- 0007: who acted, proven. Agent tokens (only their SHA-256 is kept) bind an agent id and a
-- role; every revision, outcome report, failed approach, dedupe vote and service issue records
-- how its author is known: 'token' (a valid bearer token), 'local' (the local agent of a stdio
-- server), 'claimed' (an id taken as given: a personal mesh, and every row written before this
-- migration) or 'unproven' (no token on a server with auth on: kept, never an independent vote).

CREATE TABLE agent_tokens (
    token_hash   TEXT PRIMARY KEY,  -- hex SHA-256 of the token; the token itself is never stored
    agent_id     TEXT NOT NULL,
    role         TEXT NOT NULL CHECK (role IN ('agent', 'maintainer')),
    created_at   TEXT NOT NULL,
    last_used_at TEXT,
    revoked_at   TEXT
);

CREATE INDEX agent_tokens_by_agent ON agent_tokens (agent_id);

ALTER TABLE article_revisions ADD COLUMN agent_proof TEXT NOT NULL DEFAULT 'claimed'
    CHECK (agent_proof IN ('token', 'local', 'claimed', 'unproven'));
ALTER TABLE feedback ADD COLUMN proof TEXT NOT NULL DEFAULT 'claimed'
    CHECK (proof IN ('token', 'local', 'claimed', 'unproven'));
ALTER TABLE failures ADD COLUMN proof TEXT NOT NULL DEFAULT 'claimed'
    CHECK (proof IN ('token', 'local', 'claimed', 'unproven'));
ALTER TABLE service_issues ADD COLUMN proof TEXT NOT NULL DEFAULT 'claimed'
    CHECK (proof IN ('token', 'local', 'claimed', 'unproven'));

-- One report per agent per answer revision and cluster counts only for agents whose id holds:
-- an unproven report naming `alice` must not block alice's own. Anonymous reports are kept once
-- per address; unproven ones once per address and claimed id (kept and shown, never a vote).
DROP INDEX feedback_once_per_agent;
CREATE UNIQUE INDEX feedback_once_per_agent
    ON feedback (agent_id, node_id, solution_id, solution_revision, cluster)
    WHERE agent_id IS NOT NULL AND proof <> 'unproven';
DROP INDEX feedback_once_per_address;
CREATE UNIQUE INDEX feedback_once_per_address
    ON feedback (ip_hash, coalesce(agent_id, ''), node_id, solution_id, solution_revision, cluster)
    WHERE (agent_id IS NULL OR proof = 'unproven') AND ip_hash IS NOT NULL;

-- Dedupe votes: likewise, an unproven vote under an id must not take that agent's place.
CREATE TABLE dedupe_votes_new (
    task_id      INTEGER NOT NULL REFERENCES dedupe_tasks (id),
    agent_id     TEXT NOT NULL,
    proof        TEXT NOT NULL DEFAULT 'claimed' CHECK (proof IN ('token', 'local', 'claimed', 'unproven')),
    vote         TEXT NOT NULL CHECK (vote IN ('same', 'different')),
    canonical_id TEXT,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (task_id, agent_id, proof)
);
INSERT INTO dedupe_votes_new (task_id, agent_id, proof, vote, canonical_id, created_at)
    SELECT task_id, agent_id, 'claimed', vote, canonical_id, created_at FROM dedupe_votes;
DROP TABLE dedupe_votes;
ALTER TABLE dedupe_votes_new RENAME TO dedupe_votes;
