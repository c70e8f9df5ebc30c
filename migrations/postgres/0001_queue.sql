-- The queue and its audit trail. Money is BIGINT micro-dollars; every timestamp is the database
-- clock, so remote workers' clocks never matter.

CREATE TABLE plans (
    id              TEXT PRIMARY KEY,
    project         TEXT        NOT NULL DEFAULT '',
    paused          BOOLEAN     NOT NULL DEFAULT false,
    budget_micros   BIGINT,
    spent_micros    BIGINT      NOT NULL DEFAULT 0,
    reserved_micros BIGINT      NOT NULL DEFAULT 0,
    -- PlanSpec with `tasks` emptied: the tasks live in their own rows.
    spec            JSONB       NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE tasks (
    pk               BIGSERIAL PRIMARY KEY,
    plan_id          TEXT        NOT NULL REFERENCES plans (id) ON DELETE CASCADE,
    task_id          TEXT        NOT NULL,
    ord              BIGINT      NOT NULL,
    status           TEXT        NOT NULL CHECK (status IN ('PENDING', 'CLAIMED', 'IN_PROGRESS',
                                 'BLOCKED', 'HUMAN_LOOP', 'DONE', 'FAILED', 'SKIPPED')),
    priority_rank    BIGINT      NOT NULL,
    -- Dependencies not yet DONE; a PENDING task is claimable only at zero.
    pending_deps     BIGINT      NOT NULL DEFAULT 0,
    -- Fencing token: bumped by every claim (and by an operator skip of a leased task).
    epoch            BIGINT      NOT NULL DEFAULT 0,
    attempts         BIGINT      NOT NULL DEFAULT 0,
    max_attempts     BIGINT      NOT NULL,
    worker_id        TEXT,
    lease_expires_at TIMESTAMPTZ,
    deadline_at      TIMESTAMPTZ,
    -- The task's own budget_usd, reserved at claim time instead of the worker's default.
    estimate_micros  BIGINT,
    cost_micros      BIGINT      NOT NULL DEFAULT 0,
    reserved_micros  BIGINT      NOT NULL DEFAULT 0,
    reason           TEXT,
    required_tags    TEXT[]      NOT NULL DEFAULT '{}',
    spec             JSONB       NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (plan_id, task_id)
);

-- Only what is claimable is indexed: scanning past finished rows is what slows queues down.
CREATE INDEX tasks_ready ON tasks (priority_rank, task_id)
    WHERE status = 'PENDING' AND pending_deps = 0;
-- The reaper looks only at leased rows.
CREATE INDEX tasks_leased ON tasks (lease_expires_at)
    WHERE status IN ('CLAIMED', 'IN_PROGRESS');

CREATE TABLE task_deps (
    task_pk       BIGINT NOT NULL REFERENCES tasks (pk) ON DELETE CASCADE,
    depends_on_pk BIGINT NOT NULL REFERENCES tasks (pk) ON DELETE CASCADE,
    PRIMARY KEY (task_pk, depends_on_pk)
);
CREATE INDEX task_deps_parent ON task_deps (depends_on_pk);

CREATE TABLE events (
    id          BIGSERIAL PRIMARY KEY,
    ts          TIMESTAMPTZ NOT NULL DEFAULT now(),
    event_type  TEXT        NOT NULL,
    plan_id     TEXT,
    task_id     TEXT,
    worker_id   TEXT,
    epoch       BIGINT,
    from_status TEXT,
    to_status   TEXT,
    payload     JSONB       NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX events_plan ON events (plan_id, id);

-- The audit trail is append-only, enforced by the database rather than by convention.
CREATE FUNCTION whilly_events_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the events table is append-only (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER events_no_update_delete
    BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION whilly_events_append_only();
CREATE TRIGGER events_no_truncate
    BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION whilly_events_append_only();

CREATE TABLE workers (
    id           TEXT PRIMARY KEY,
    host         TEXT        NOT NULL DEFAULT '',
    slots        BIGINT      NOT NULL DEFAULT 1,
    tags         TEXT[]      NOT NULL DEFAULT '{}',
    started_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
