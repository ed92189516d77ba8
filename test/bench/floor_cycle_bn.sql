-- The floor (a), full cycle, batch n: a hand-written queue on a plain table,
-- one batch of :batch messages per cycle.  Three autocommit statements: send
-- commits, receive commits, delete commits.  The receive's ids are aggregated
-- into one array so pgbench can carry them to the delete (\gset takes one row);
-- a receive that got nothing (all rows taken by others) deletes nothing.
-- @ORDER@: see floor_cycle_b1.sql.  Run with -M prepared.
-- Variables: :body, :batch.  Table: bench_floor (see lib.sh).
INSERT INTO bench_floor (visible_at, body) SELECT now(), :body FROM generate_series(1, :batch::int);
WITH r AS (
  UPDATE bench_floor SET visible_at = now() + interval '30 s', receive_count = receive_count + 1
   WHERE id IN (SELECT id FROM bench_floor WHERE visible_at <= now()
                 ORDER BY @ORDER@ LIMIT :batch::int FOR UPDATE SKIP LOCKED)
  RETURNING id)
SELECT count(*) AS got, array_agg(id) AS ids FROM r \gset
\if :got > 0
DELETE FROM bench_floor WHERE id = ANY (:ids::bigint[]);
\endif
