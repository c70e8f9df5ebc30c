-- Whilly's queue and audit trail (SQLite). Times are integer milliseconds since the Unix epoch,
-- taken from the database clock; money is integer micro-dollars.

CREATE TABLE plans (
    id              TEXT PRIMARY KEY NOT NULL,
    project         TEXT NOT NULL,
    paused          INTEGER NOT NULL DEFAULT 0,
    budget_micros   INTEGER,
    spent_micros    INTEGER NOT NULL DEFAULT 0,
    reserved_micros INTEGER NOT NULL DEFAULT 0,
    spec            TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);

CREATE TABLE tasks (
    pk               INTEGER PRIMARY KEY,
    plan_id          TEXT NOT NULL REFERENCES plans(id) ON DELETE CASCADE,
    task_id          TEXT NOT NULL,
    ord              INTEGER NOT NULL,
    status           TEXT NOT NULL,
    priority_rank    INTEGER NOT NULL,
    pending_deps     INTEGER NOT NULL DEFAULT 0,
    epoch            INTEGER NOT NULL DEFAULT 0,
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    worker_id        TEXT,
    lease_expires_at INTEGER,
    deadline_at      INTEGER,
    estimate_micros  INTEGER,
    cost_micros      INTEGER NOT NULL DEFAULT 0,
    reserved_micros  INTEGER NOT NULL DEFAULT 0,
    reason           TEXT,
    required_tags    TEXT NOT NULL DEFAULT '[]',
    spec             TEXT NOT NULL,
    updated_at       INTEGER NOT NULL,
    UNIQUE (plan_id, task_id)
);

-- Only claimable rows are indexed, so the claim never scans finished or blocked work.
CREATE INDEX tasks_claimable ON tasks (priority_rank, task_id)
    WHERE status = 'PENDING' AND pending_deps = 0;
-- The reaper looks only at leased rows.
CREATE INDEX tasks_leased ON tasks (lease_expires_at)
    WHERE status IN ('CLAIMED', 'IN_PROGRESS');
CREATE INDEX tasks_plan_ord ON tasks (plan_id, ord);

CREATE TABLE task_deps (
    task_pk       INTEGER NOT NULL REFERENCES tasks(pk) ON DELETE CASCADE,
    depends_on_pk INTEGER NOT NULL REFERENCES tasks(pk) ON DELETE CASCADE,
    PRIMARY KEY (task_pk, depends_on_pk)
) WITHOUT ROWID;

CREATE INDEX task_deps_parent ON task_deps (depends_on_pk);

CREATE TABLE events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    ts          INTEGER NOT NULL,
    event_type  TEXT NOT NULL,
    plan_id     TEXT,
    task_id     TEXT,
    worker_id   TEXT,
    epoch       INTEGER,
    from_status TEXT,
    to_status   TEXT,
    payload     TEXT NOT NULL DEFAULT 'null'
);

CREATE INDEX events_plan ON events (plan_id, id);
CREATE INDEX events_task ON events (plan_id, task_id, id);

-- The audit trail is append-only: history cannot be rewritten, even by hand.
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;

CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;

CREATE TABLE workers (
    id           TEXT PRIMARY KEY NOT NULL,
    host         TEXT NOT NULL,
    slots        INTEGER NOT NULL,
    tags         TEXT NOT NULL DEFAULT '[]',
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
);
