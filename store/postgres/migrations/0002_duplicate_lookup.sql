-- 0002: a duplicate (the same normalized error with the same quoted values) is found by one
-- index probe. With `signature_hash` alone every create read all its siblings (a template such
-- as `no module named '<*>'` has thousands), and an import of 1,000,000 nodes slowed to ~200/s.
-- The values go in as md5: a btree entry is limited to a third of a page, and quoted values
-- (paths, URLs) have no length limit of their own.

CREATE INDEX nodes_by_duplicate_key ON nodes (signature_hash, md5(quoted_values));
DROP INDEX nodes_by_signature;
