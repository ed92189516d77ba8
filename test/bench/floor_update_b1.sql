-- The floor (b), UPDATE by primary key alone, batch 1: the lease a receive
-- writes, with no search.  Client c updates, in turn, the rows of its own
-- region :region * c + 1 ... :region * (c + 1) (so clients never wait for
-- each other).  Variables: :region, :batch, :i (starts at 0).
\set lo :region * :client_id + (:i * :batch) % :region + 1
\set i :i + 1
UPDATE bench_floor SET visible_at = now() + interval '30 s', receive_count = receive_count + 1
 WHERE id = :lo;
