-- A plan's counts by status (asked by every idle engine at its safety poll, by `status` and the
-- console) read this index alone instead of every task row with its spec: on a 100,000-task
-- plan that is the difference between a few hundred kilobytes and the whole table.
CREATE INDEX tasks_plan_status ON tasks (plan_id, status, pending_deps);
