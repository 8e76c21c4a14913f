-- Threads, their metadata, their events. The writer lease is a thread's
-- row: every append locks it, so the seq check and the fencing check see
-- the same lease a takeover would change.

-- Fencing generations come from one sequence, so a generation is never
-- granted twice, even to a thread deleted and re-created under its old id.
CREATE SEQUENCE IF NOT EXISTS roder_lease_generation;

CREATE TABLE IF NOT EXISTS roder_threads (
    thread_id        TEXT PRIMARY KEY,
    -- The seq of the last event appended (0 for none).
    last_seq         BIGINT NOT NULL DEFAULT 0,
    -- The last generation granted (0: never leased).
    lease_generation BIGINT NOT NULL DEFAULT 0,
    -- The holder, NULL when nobody holds the lease (released or never taken).
    lease_owner_id   TEXT,
    lease_holder     JSONB,
    -- On the database clock (now()), never a replica's.
    lease_expires_at TIMESTAMPTZ
);

CREATE TABLE IF NOT EXISTS roder_thread_metadata (
    thread_id  TEXT PRIMARY KEY REFERENCES roder_threads (thread_id) ON DELETE CASCADE,
    -- `json`, not `jsonb`: kept byte for byte as serde wrote it.
    metadata   JSON NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

CREATE INDEX IF NOT EXISTS roder_thread_metadata_by_update
    ON roder_thread_metadata (updated_at DESC, thread_id);

CREATE TABLE IF NOT EXISTS roder_events (
    thread_id TEXT NOT NULL REFERENCES roder_threads (thread_id) ON DELETE CASCADE,
    seq       BIGINT NOT NULL,
    -- The envelope's compact JSON, byte for byte: pages are bounded by it.
    envelope  JSON NOT NULL,
    -- The primary key's index is the cursor: WHERE thread_id = $1 AND seq > $2.
    PRIMARY KEY (thread_id, seq)
);
