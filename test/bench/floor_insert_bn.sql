-- The floor, INSERT alone, batch n: one multi-row INSERT of :batch rows.
INSERT INTO bench_floor (visible_at, body) SELECT now(), :body FROM generate_series(1, :batch::int);
