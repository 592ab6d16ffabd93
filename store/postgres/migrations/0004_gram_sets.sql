-- 0004: the trigram channel matches each node's own template trigrams exactly, as FTS5's trigram
-- table does. pg_trgm indexes word trigrams: a gram across a space or a colon (`x f`, `or:`) was
-- looked up as padded word ends that nearly every row has, then rechecked row by row (145,391 rows
-- rechecked, 115 ms, for one channel at 300,000 nodes). `grams` holds the distinct trigrams of
-- `templates` (`shared.gram_terms`, what term_counts counts as 'gram'); the search index rebuild
-- that comes with this change rewrites it from Python, so the backfill here is only for the gap.

ALTER TABLE node_grams ADD COLUMN grams text[] NOT NULL DEFAULT '{}';
UPDATE node_grams g
   SET grams = ARRAY(SELECT DISTINCT substr(g.templates, i, 3) FROM generate_series(1, length(g.templates) - 2) AS i);
DROP INDEX node_grams_trigrams;
CREATE INDEX node_grams_sets ON node_grams USING gin (grams);
