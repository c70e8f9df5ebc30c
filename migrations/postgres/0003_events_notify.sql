-- Followers of the audit trail (the console, `events --follow`) wait for this instead of polling:
-- one notification per statement that inserts events, whichever process or version of whilly
-- wrote them (Postgres folds equal notifications of one transaction into one, delivered at
-- COMMIT). The payload is empty: a follower reads the events after the last one it saw.
CREATE FUNCTION whilly_events_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('whilly_events', '');
    RETURN NULL;
END;
$$;
CREATE TRIGGER events_notify
    AFTER INSERT ON events
    FOR EACH STATEMENT EXECUTE FUNCTION whilly_events_notify();
