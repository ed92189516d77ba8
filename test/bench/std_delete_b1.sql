-- The extension, delete alone, batch 1: run.sh leased the messages beforehand
-- and wrote their receipts to bench_handles; see floor_delete_b1.sql for how
-- clients split them.  Variables: :queue, :per, :batch, :i (starts at 0).
\set lo :per * :client_id + :i * :batch + 1
\set i :i + 1
SELECT queue.delete(:queue, receipt) FROM bench_handles WHERE n = :lo;
