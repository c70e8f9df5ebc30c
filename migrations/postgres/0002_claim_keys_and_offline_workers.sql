-- What a task holds while it runs (domain::graph::claim_keys: "<repo target>\t<key file>"): a
-- claim is refused while a task with a live lease holds one of the same keys, whichever process
-- or machine holds it. Computed by the importer; tasks imported before this migration get theirs
-- here, normalised as the importer does (trimmed, leading "./" and trailing "/" removed).
ALTER TABLE tasks ADD COLUMN claim_keys TEXT[] NOT NULL DEFAULT '{}';

UPDATE tasks SET claim_keys = ARRAY(
    SELECT DISTINCT COALESCE(spec->>'repo_target_id', '') || E'\t' || k.norm
    FROM (SELECT regexp_replace(regexp_replace(btrim(j), '^(\./+)+', ''), '/+$', '') AS norm
          FROM jsonb_array_elements_text(
              CASE WHEN jsonb_typeof(spec->'key_files') = 'array' THEN spec->'key_files'
                   ELSE '[]'::jsonb END) AS j) AS k
    WHERE k.norm <> ''
    ORDER BY 1)
WHERE status NOT IN ('DONE', 'FAILED', 'SKIPPED');

-- A worker whose heartbeat is older than the offline threshold is marked here by the reaper of
-- any live worker; its heartbeat clears the mark if it was only cut off for a while.
ALTER TABLE workers ADD COLUMN offline_at TIMESTAMPTZ;
