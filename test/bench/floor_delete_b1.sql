-- The floor, DELETE by primary key alone, batch 1 (floor (a)'s delete and
-- floor (b)'s DELETE).  run.sh leased the messages beforehand and wrote their
-- ids to bench_handles (n = 1, 2, ...); client c deletes the handles
-- :per * c + 1 ... :per * (c + 1), :batch per transaction (pgbench -t).
-- The extension's delete scripts look their receipts up the same way.
-- Variables: :per, :batch, :i (starts at 0).
\set lo :per * :client_id + :i * :batch + 1
\set i :i + 1
DELETE FROM bench_floor WHERE id = (SELECT id FROM bench_handles WHERE n = :lo);
