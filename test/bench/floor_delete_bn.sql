-- The floor, DELETE by primary key alone, batch n: see floor_delete_b1.sql.
\set lo :per * :client_id + :i * :batch + 1
\set hi :lo + :batch - 1
\set i :i + 1
DELETE FROM bench_floor WHERE id IN (SELECT id FROM bench_handles WHERE n BETWEEN :lo AND :hi);
