-- 0007: redirects looked up by canonical_id (the change feed's merged nodes of each node, a merge's
-- repointing) scanned every redirect, as on SQLite before its 0013.
CREATE INDEX node_redirects_by_canonical ON node_redirects (canonical_id, node_id);
