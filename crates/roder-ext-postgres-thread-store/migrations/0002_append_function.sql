-- An append in one round trip: the row lock, the fence, the seq check, the
-- insert, the log's new end and the notification, in one call (one
-- implicit transaction). Refusals raise SQLSTATEs of class RD with the
-- facts in DETAIL; the store turns them into its messages.
--   RD001  the thread does not exist (leased append)
--   RD002  another writer holds a live lease (unleased append); DETAIL: holder JSON
--   RD003  stale generation; DETAIL: '<current> <holder JSON>'
--   RD004  the lease expired or was released
--   RD005  the batch does not continue the log; DETAIL: the log's last seq
CREATE OR REPLACE FUNCTION roder_append(
    p_thread TEXT,
    p_generation BIGINT,   -- NULL: an unleased append
    p_seqs BIGINT[],
    p_envelopes TEXT[],
    p_channel TEXT
) RETURNS VOID LANGUAGE plpgsql AS $$
DECLARE
    head RECORD;
BEGIN
    IF p_generation IS NULL THEN
        INSERT INTO roder_threads (thread_id) VALUES (p_thread) ON CONFLICT DO NOTHING;
    END IF;
    SELECT last_seq, lease_generation,
           (lease_owner_id IS NOT NULL AND lease_expires_at > now()) AS live,
           COALESCE(lease_holder::text, '') AS holder
      INTO head
      FROM roder_threads WHERE thread_id = p_thread FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'roder: no thread' USING ERRCODE = 'RD001';
    END IF;
    IF p_generation IS NULL THEN
        IF head.live THEN
            RAISE EXCEPTION 'roder: leased' USING ERRCODE = 'RD002', DETAIL = head.holder;
        END IF;
    ELSIF p_generation <> head.lease_generation THEN
        RAISE EXCEPTION 'roder: stale' USING ERRCODE = 'RD003',
            DETAIL = head.lease_generation || ' ' || head.holder;
    ELSIF NOT head.live THEN
        RAISE EXCEPTION 'roder: expired' USING ERRCODE = 'RD004';
    END IF;
    IF p_seqs[1] <> head.last_seq + 1 THEN
        RAISE EXCEPTION 'roder: seq' USING ERRCODE = 'RD005', DETAIL = head.last_seq::text;
    END IF;
    INSERT INTO roder_events (thread_id, seq, envelope)
        SELECT p_thread, seq, envelope::json
          FROM UNNEST(p_seqs, p_envelopes) AS batch (seq, envelope);
    UPDATE roder_threads SET last_seq = p_seqs[array_length(p_seqs, 1)]
     WHERE thread_id = p_thread;
    PERFORM pg_notify(p_channel, p_thread || ' ' || p_seqs[array_length(p_seqs, 1)]);
END;
$$;
