-- 0010: document frequencies in a table the indexing transaction keeps, as on PostgreSQL.
-- fts5vocab counts a term by walking its whole doclist on every lookup (0.36 ms a search at
-- 100,000 nodes); a primary-key probe does not. 'head' counts the nodes whose title or signature
-- holds a term, so the title-and-signature channel chooses terms by their frequency there.
-- The fts5vocab tables stay: they count what this table must equal (tests hold them alike).

CREATE TABLE term_counts (
    kind TEXT NOT NULL CHECK (kind IN ('term', 'head', 'gram')),
    term TEXT NOT NULL,
    doc  INTEGER NOT NULL CHECK (doc >= 0),
    PRIMARY KEY (kind, term)
) WITHOUT ROWID;

CREATE VIRTUAL TABLE head_terms USING fts5vocab (node_heads, 'row');

INSERT INTO term_counts (kind, term, doc) SELECT 'term', term, doc FROM search_terms;
INSERT INTO term_counts (kind, term, doc) SELECT 'head', term, doc FROM head_terms;
INSERT INTO term_counts (kind, term, doc) SELECT 'gram', term, doc FROM gram_terms;
