-- 0009: a duplicate (the same normalized error with the same quoted values) is found by one
-- index probe. With `signature_hash` alone every create read all its siblings (a template such
-- as `no module named '<*>'` has thousands), and an import of 1,000,000 nodes slowed to ~200/s.

CREATE INDEX nodes_by_duplicate_key ON nodes (signature_hash, quoted_values);
DROP INDEX nodes_by_signature;
