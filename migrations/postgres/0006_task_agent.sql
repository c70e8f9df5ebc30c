-- The agent a task's current (or last) attempt runs on, set by the claim: its own, or the
-- fallback chosen while its own was blocked. Claims count the live leases per agent from it to
-- enforce `[agents.<name>] max_parallel` across every worker on the queue.
ALTER TABLE tasks ADD COLUMN agent TEXT;

-- Workers look up rate-limit pauses (`agent.paused`) by type when they start.
CREATE INDEX events_type ON events (event_type, id);
