-- 0008: maintainers. Every maintainer action (a node's status set to verified, draft or
-- deprecated, a flagged duplicate pair confirmed as a merge, a service issue closed or
-- discarded) is one row of an append-only audit log naming who did it and how that is known.
-- A merged node keeps its history and evidence and answers with a redirect to its canonical.

CREATE TABLE maintainer_actions (
    id            INTEGER PRIMARY KEY,
    action        TEXT NOT NULL CHECK (action IN ('set_status', 'merge', 'close_issue', 'discard_issue')),
    target        TEXT NOT NULL,  -- a node id, or an issue number as text
    detail        TEXT NOT NULL,  -- JSON: {from, to} for a status, {canonical, task_id} for a merge
    note          TEXT,
    maintainer_id TEXT NOT NULL,
    proof         TEXT NOT NULL CHECK (proof IN ('token', 'local')),
    created_at    TEXT NOT NULL
);

CREATE INDEX maintainer_actions_by_target ON maintainer_actions (target, id);

CREATE TRIGGER maintainer_actions_append_only BEFORE UPDATE ON maintainer_actions
BEGIN
    SELECT RAISE(ABORT, 'maintainer actions are an audit log: append only');
END;

CREATE TRIGGER maintainer_actions_never_deleted BEFORE DELETE ON maintainer_actions
BEGIN
    SELECT RAISE(ABORT, 'maintainer actions are an audit log: append only');
END;

CREATE TABLE node_redirects (
    node_id      TEXT PRIMARY KEY REFERENCES nodes (id),
    canonical_id TEXT NOT NULL REFERENCES nodes (id),
    action_id    INTEGER NOT NULL REFERENCES maintainer_actions (id),
    created_at   TEXT NOT NULL,
    CHECK (node_id <> canonical_id)
);

ALTER TABLE service_issues ADD COLUMN resolution TEXT;  -- JSON {note, maintainer, at} once closed or discarded
