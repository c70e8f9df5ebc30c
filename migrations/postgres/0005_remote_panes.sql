-- Remote panes: a worker publishes the terminal output of its agents while a console on another
-- machine watches them. Nothing here is audit: rows are short-lived and pruned by the
-- publisher (a task's rows go with the task).

-- Who watches which task's terminal; a watch not refreshed for a few seconds has ended.
CREATE TABLE pane_watchers (
    task_pk   BIGINT      NOT NULL REFERENCES tasks (pk) ON DELETE CASCADE,
    viewer    TEXT        NOT NULL,
    since     TIMESTAMPTZ NOT NULL DEFAULT now(),
    seen_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (task_pk, viewer)
);

-- The output, in order per task: a snapshot (the whole screen, to start or resync from) or the
-- bytes that followed it; `data` is deflate-compressed when `compressed`.
CREATE TABLE pane_chunks (
    id         BIGSERIAL   PRIMARY KEY,
    task_pk    BIGINT      NOT NULL REFERENCES tasks (pk) ON DELETE CASCADE,
    attempt    BIGINT      NOT NULL,
    snapshot   BOOLEAN     NOT NULL,
    rows       INTEGER     NOT NULL,
    cols       INTEGER     NOT NULL,
    compressed BOOLEAN     NOT NULL,
    data       BYTEA       NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX pane_chunks_by_task ON pane_chunks (task_pk, id);

-- Keys typed into a remote pane (only with `[remote] takeover = true` on both sides).
CREATE TABLE pane_input (
    id         BIGSERIAL   PRIMARY KEY,
    task_pk    BIGINT      NOT NULL REFERENCES tasks (pk) ON DELETE CASCADE,
    viewer     TEXT        NOT NULL,
    data       BYTEA       NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX pane_input_by_task ON pane_input (task_pk, id);
