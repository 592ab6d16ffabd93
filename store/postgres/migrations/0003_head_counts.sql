-- 0003: term_counts also counts, as 'head', the nodes whose title or signature holds a term, so
-- the title-and-signature channel chooses terms by their frequency there (SQLite's 0010).

ALTER TABLE term_counts DROP CONSTRAINT term_counts_kind_check;
ALTER TABLE term_counts ADD CONSTRAINT term_counts_kind_check CHECK (kind IN ('term', 'head', 'gram'));

INSERT INTO term_counts (kind, term, doc)
SELECT 'head', term, count(DISTINCT node_pk)
FROM node_heads, regexp_split_to_table(title || ' ' || signature, '\s+') AS term
WHERE term <> ''
GROUP BY term;
