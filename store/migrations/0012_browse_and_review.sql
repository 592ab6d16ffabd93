-- 0012: the home page, the node index and the review queue read the nodes table whole. At 100,000
-- nodes `ecosystem_counts` scanned every row (140 ms, each page view of / and /nodes), the
-- unsolved and stale reasons of the review queue scanned and sorted it (40 and 30 ms), and
-- failure reports newer than their article walked every node to probe its feedback (114 ms with
-- no feedback at all). With these: 13, 19, 21 and 0.6 ms.

-- Counting by ecosystem is a scan of this index alone; it serves every lookup the old
-- (ecosystem, id) index served, so that one goes.
DROP INDEX nodes_by_ecosystem;
CREATE INDEX nodes_by_ecosystem ON nodes (ecosystem, id, status, has_answer);

-- Open problems oldest first; answered nodes in id order (the stale reason, the sitemap's files).
CREATE INDEX nodes_by_answer_age ON nodes (has_answer, created_at, id);
CREATE INDEX nodes_by_answer ON nodes (has_answer, id, status);

-- Failure reports are found from the reports, not from every node.
CREATE INDEX feedback_by_outcome ON feedback (outcome, node_id);
