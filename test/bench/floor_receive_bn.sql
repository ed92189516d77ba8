-- The floor (a), receive alone (any batch): lease up to :batch visible
-- messages for 30 s.  run.sh fills the table with more visible messages than
-- the run takes (pgbench -t), so every receive finds :batch.  @ORDER@: see
-- floor_cycle_b1.sql.
UPDATE bench_floor SET visible_at = now() + interval '30 s', receive_count = receive_count + 1
 WHERE id IN (SELECT id FROM bench_floor WHERE visible_at <= now()
               ORDER BY @ORDER@ LIMIT :batch::int FOR UPDATE SKIP LOCKED)
RETURNING id;
