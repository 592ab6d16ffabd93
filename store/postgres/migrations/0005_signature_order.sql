-- 0005: the signature channel reads each hash's nodes in node order and stops at its limit. A common
-- error shape (`no module named '<*>'`) has thousands of nodes under one hash; with (hash, values)
-- and (hash, specific) alone, every one of them was read and sorted to keep the first 40 (12,659
-- rows, 26 ms, for one pasted error at 300,000 nodes).

DROP INDEX node_signatures_by_values;
CREATE INDEX node_signatures_by_values ON node_signatures (hash, quoted_values, node_pk, source);
DROP INDEX node_signatures_by_kind;
CREATE INDEX node_signatures_by_kind ON node_signatures (hash, specific, node_pk, source);
