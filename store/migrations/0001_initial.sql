-- 0001: nodes, their immutable versions, article revisions, solution revisions, full-text index.
-- Later migrations add evidence (feedback, failures, node_stats), review, dedupe, issues and
-- sync state; docs/decisions.md has the plan.

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- One row per problem. Mutable summary of the current article; the content itself lives
-- in node_versions. `pk` is the rowid shared with node_search.
CREATE TABLE nodes (
    pk               INTEGER PRIMARY KEY,
    id               TEXT NOT NULL UNIQUE,
    ecosystem        TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('draft', 'verified', 'deprecated')),
    title            TEXT NOT NULL,
    current_version  TEXT NOT NULL,
    current_revision INTEGER NOT NULL CHECK (current_revision >= 1),
    has_answer       INTEGER NOT NULL CHECK (has_answer IN (0, 1)),
    signature_hash   TEXT NOT NULL,
    quoted_values    TEXT NOT NULL,  -- JSON array: tells a duplicate from a sibling error
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    change_seq       INTEGER NOT NULL  -- global, increasing on every node write: the sync cursor
);
CREATE INDEX nodes_by_ecosystem ON nodes (ecosystem, id);
CREATE INDEX nodes_by_signature ON nodes (signature_hash);
CREATE UNIQUE INDEX nodes_by_change ON nodes (change_seq);

-- Immutable content snapshots, keyed by their content hash.
CREATE TABLE node_versions (
    version            TEXT PRIMARY KEY,
    node_id            TEXT NOT NULL REFERENCES nodes (id),
    document           TEXT NOT NULL,  -- canonical JSON of the stored document
    solution_revisions TEXT NOT NULL,  -- JSON {solution_id: revision} for this snapshot
    created_at         TEXT NOT NULL
);
CREATE INDEX node_versions_by_node ON node_versions (node_id);
CREATE TRIGGER node_versions_immutable BEFORE UPDATE ON node_versions
BEGIN SELECT RAISE(ABORT, 'node_versions rows are immutable'); END;
CREATE TRIGGER node_versions_kept BEFORE DELETE ON node_versions
BEGIN SELECT RAISE(ABORT, 'node_versions rows are never deleted'); END;

-- Append-only article history; revision 1 is the creation.
CREATE TABLE article_revisions (
    revision_id         TEXT PRIMARY KEY,
    node_id             TEXT NOT NULL REFERENCES nodes (id),
    revision            INTEGER NOT NULL CHECK (revision >= 1),
    parent_revision     INTEGER,
    kind                TEXT NOT NULL CHECK (kind IN ('create', 'edit', 'undo', 'import', 'sync')),
    version             TEXT NOT NULL REFERENCES node_versions (version),
    agent_id            TEXT,
    model               TEXT,
    summary             TEXT NOT NULL,
    changes             TEXT NOT NULL,  -- JSON list of field-level changes against the parent
    reverts_revision_id TEXT REFERENCES article_revisions (revision_id),
    created_at          TEXT NOT NULL,
    UNIQUE (node_id, revision)
);
CREATE TRIGGER article_revisions_immutable BEFORE UPDATE ON article_revisions
BEGIN SELECT RAISE(ABORT, 'article_revisions rows are immutable'); END;
CREATE TRIGGER article_revisions_kept BEFORE DELETE ON article_revisions
BEGIN SELECT RAISE(ABORT, 'article_revisions rows are never deleted'); END;

-- One-time undo tokens: only a hash is kept; used_at makes them single-use.
CREATE TABLE undo_tokens (
    revision_id TEXT PRIMARY KEY REFERENCES article_revisions (revision_id),
    token_hash  TEXT NOT NULL,
    used_at     TEXT
);

-- A solution's revision advances only when its behaviour (fix, verify) changes; reverting
-- to an earlier behaviour finds the earlier row by its hash and reuses its number.
CREATE TABLE solution_revisions (
    node_id       TEXT NOT NULL REFERENCES nodes (id),
    solution_id   TEXT NOT NULL,
    revision      INTEGER NOT NULL CHECK (revision >= 1),
    behavior_hash TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    PRIMARY KEY (node_id, solution_id, revision),
    UNIQUE (node_id, solution_id, behavior_hash)
);

-- Full-text index of the current article; rowid = nodes.pk, rewritten in the node's write.
CREATE VIRTUAL TABLE node_search USING fts5 (
    title,
    signature,
    article,
    tokenize = 'unicode61 remove_diacritics 2'
);

-- Signature hashes are derived data: when the code's normalizer version differs from this
-- value, every stored hash is recomputed on open and the value updated.
INSERT INTO meta (key, value) VALUES ('normalizer_version', '1');
