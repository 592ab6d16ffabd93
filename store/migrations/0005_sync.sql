-- 0005: pulling a remote mesh (`knowmesh-mcp sync --from URL`).

-- Where each remote's change feed was read up to: the next sync resumes here.
CREATE TABLE sync_state (
    remote    TEXT PRIMARY KEY,  -- the remote's base URL
    cursor    TEXT NOT NULL,     -- its /v1/changes next_cursor
    synced_at TEXT NOT NULL
);

-- The last revision of each node that is identical here and on the remote (the merge base),
-- and the remote's last feedback row copied here.
CREATE TABLE synced_nodes (
    remote         TEXT NOT NULL,
    node_id        TEXT NOT NULL REFERENCES nodes (id),
    revision       INTEGER NOT NULL CHECK (revision >= 0),
    evidence_after INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (remote, node_id)
);

-- A node edited here and on the remote since the merge base. The local revisions are moved
-- here whole (rows and documents), the remote's take their numbers, and the local edit is
-- published again on top (`kept_revision`), or not, when it no longer validates (NULL).
CREATE TABLE sync_conflicts (
    id              INTEGER PRIMARY KEY,
    remote          TEXT NOT NULL,
    node_id         TEXT NOT NULL REFERENCES nodes (id),
    base_revision   INTEGER NOT NULL,
    remote_revision INTEGER NOT NULL,
    local_revisions TEXT NOT NULL,  -- JSON: the moved revision rows, each with its document
    both_changed    TEXT NOT NULL,  -- JSON: fields both sides changed (the local value is kept on top)
    kept_revision   INTEGER,
    created_at      TEXT NOT NULL
);

-- Revisions are never deleted, except local ones a sync moved into sync_conflicts.
CREATE TABLE moved_revisions (
    revision_id TEXT PRIMARY KEY,
    conflict_id INTEGER NOT NULL REFERENCES sync_conflicts (id)
);

DROP TRIGGER article_revisions_kept;

CREATE TRIGGER article_revisions_kept BEFORE DELETE ON article_revisions
WHEN NOT EXISTS (SELECT 1 FROM moved_revisions WHERE revision_id = OLD.revision_id)
BEGIN SELECT RAISE(ABORT, 'article_revisions rows are never deleted'); END;
