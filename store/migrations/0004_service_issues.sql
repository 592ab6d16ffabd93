-- 0004: reports about the service itself (protocol section 12), read by the maintainer.

CREATE TABLE service_issues (
    number      INTEGER PRIMARY KEY,
    title       TEXT NOT NULL,
    body        TEXT NOT NULL,
    details     TEXT NOT NULL,  -- JSON: endpoint, request, expected, actual, environment, labels
    agent_id    TEXT,
    model       TEXT,
    ip_hash     TEXT,
    status      TEXT NOT NULL CHECK (status IN ('open', 'closed', 'discarded')),
    created_at  TEXT NOT NULL
);
