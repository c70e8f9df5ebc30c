-- A plan the operator put away (`whilly plan archive`): hidden from lists, kept with its tasks
-- and events; NULL while the plan is listed.
ALTER TABLE plans ADD COLUMN archived_at TIMESTAMPTZ;
