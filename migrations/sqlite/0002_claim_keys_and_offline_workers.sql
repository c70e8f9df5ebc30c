-- What a task holds while it runs (domain::graph::claim_keys: "<repo target>\t<key file>", a JSON
-- array): a claim is refused while a task with a live lease holds one of the same keys. Computed
-- by the importer; tasks imported before this migration get theirs here, normalised as the
-- importer does.
ALTER TABLE tasks ADD COLUMN claim_keys TEXT NOT NULL DEFAULT '[]';

UPDATE tasks SET claim_keys = COALESCE((
    SELECT json_group_array(k) FROM (
        SELECT DISTINCT COALESCE(json_extract(tasks.spec, '$.repo_target_id'), '') || char(9) || n AS k
        FROM (SELECT rtrim(CASE WHEN substr(trim(j.value), 1, 2) = './'
                                THEN ltrim(substr(trim(j.value), 3), '/')
                                ELSE trim(j.value) END, '/') AS n
              FROM json_each(tasks.spec, '$.key_files') AS j)
        WHERE n <> ''
        ORDER BY k)), '[]')
WHERE status NOT IN ('DONE', 'FAILED', 'SKIPPED') AND json_type(spec, '$.key_files') = 'array';

-- A worker whose heartbeat is older than the offline threshold is marked here (ms since the
-- epoch) by the reaper of any live worker; its heartbeat clears the mark.
ALTER TABLE workers ADD COLUMN offline_at INTEGER;
