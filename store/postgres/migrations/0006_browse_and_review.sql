-- 0006: the home page, the node index and the review queue read the nodes table whole (SQLite's
-- 0012). At 100,000 nodes `ecosystem_counts` was a sequential scan (37 ms, each page view of / and
-- /nodes), 13-18 ms as a scan of this index alone; it serves every lookup the old (ecosystem, id)
-- index served, so that one goes. Open problems are read oldest first without sorting every open
-- problem of a big mesh, answered nodes in id order (the stale reason, the sitemap's files), and
-- failure reports from the reports, not from every node.

DROP INDEX nodes_by_ecosystem;
CREATE INDEX nodes_by_ecosystem ON nodes (ecosystem, id, status, has_answer);
CREATE INDEX nodes_by_answer_age ON nodes (has_answer, created_at COLLATE "C", id);
CREATE INDEX nodes_by_answer ON nodes (has_answer, id, status);
CREATE INDEX feedback_by_outcome ON feedback (outcome, node_id);
