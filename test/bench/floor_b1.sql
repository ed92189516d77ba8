-- The floor, batch 1: a hand-written queue on a plain table, one message per
-- cycle.  Three autocommit statements, as a real producer and consumer would
-- issue them: send commits, receive commits, delete commits.
-- Run with -M prepared (or extended): each :variable is then bound as a
-- parameter, so receipts and ids need no quoting.
-- Variables: :body (message text).  Table: bench_floor (see run.sh).
INSERT INTO bench_floor (visible_at, body) VALUES (now(), :body);
UPDATE bench_floor SET visible_at = now() + interval '30 s', receive_count = receive_count + 1
 WHERE id IN (SELECT id FROM bench_floor WHERE visible_at <= now()
               ORDER BY visible_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id \gset
DELETE FROM bench_floor WHERE id = :id;
