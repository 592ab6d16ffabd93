-- 0006: search channels. The fuzzy channel: node_grams holds each node's templates (normalized error
-- and aliases, placeholders removed) as trigrams, so a query line that shares pieces of words
-- with a template (a typo, `module not found` against `ModuleNotFoundError`) still finds it;
-- gram_terms counts the nodes holding each trigram, so only rare ones are searched.
-- Derived rows: the service rebuilds them on open when search_index_version differs.

CREATE VIRTUAL TABLE node_grams USING fts5 (
    templates,
    tokenize = 'trigram'
);
CREATE VIRTUAL TABLE gram_terms USING fts5vocab (node_grams, 'row');

-- A node is `specific` when its id names its quoted value (`No module named 'cv2'` in
-- python/no-module-cv2-opencv); a generic node's quoted value is an example. Among the many nodes sharing an
-- error shape the signature channel reads those naming the query's values first, generic
-- ones next, then the rest.
ALTER TABLE node_signatures ADD COLUMN specific INTEGER NOT NULL DEFAULT 0;
CREATE INDEX node_signatures_by_kind ON node_signatures (hash, specific);

-- What ranking reads of every candidate, derived once at write time instead of for every
-- query: the term keys of each template (one line each), of the node id's slug, and of the
-- error's values that can name what the node is about.
ALTER TABLE node_index ADD COLUMN template_terms TEXT NOT NULL DEFAULT '';
ALTER TABLE node_index ADD COLUMN slug_terms TEXT NOT NULL DEFAULT '';
ALTER TABLE node_index ADD COLUMN value_terms TEXT NOT NULL DEFAULT '';
-- The shape of each value of the error, in order: `path` (holds a / or \ or starts with .) or
-- `name`: a node about a missing path is not the answer to a missing package.
ALTER TABLE node_index ADD COLUMN value_shapes TEXT NOT NULL DEFAULT '';

UPDATE meta SET value = '0' WHERE key = 'search_index_version';
