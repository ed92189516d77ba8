-- The floor (b), UPDATE by primary key alone, batch n: see floor_update_b1.sql.
\set lo :region * :client_id + (:i * :batch) % :region + 1
\set hi :lo + :batch - 1
\set i :i + 1
UPDATE bench_floor SET visible_at = now() + interval '30 s', receive_count = receive_count + 1
 WHERE id BETWEEN :lo AND :hi;
