-- The floor (a), full cycle, batch 1: a hand-written queue on a plain table,
-- one message per cycle.  Three autocommit statements, as a real producer and
-- consumer would issue them: send commits, receive commits, delete commits.
-- @ORDER@ is replaced by run.sh: "visible_at, id" on the table with an index
-- on (visible_at, id), "id" on the table with the primary key alone.
-- Run with -M prepared: each :variable is then bound as a parameter.
-- Variables: :body.  Table: bench_floor (see lib.sh).
INSERT INTO bench_floor (visible_at, body) VALUES (now(), :body);
UPDATE bench_floor SET visible_at = now() + interval '30 s', receive_count = receive_count + 1
 WHERE id IN (SELECT id FROM bench_floor WHERE visible_at <= now()
               ORDER BY @ORDER@ LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id \gset
DELETE FROM bench_floor WHERE id = :id;
