-- A plan the operator put away (`whilly plan archive`): hidden from lists, kept with its tasks
-- and events; ms since the epoch, NULL while the plan is listed.
ALTER TABLE plans ADD COLUMN archived_at INTEGER;
