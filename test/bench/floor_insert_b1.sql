-- The floor, INSERT alone, batch 1 (floor (a)'s send, and floor (b)'s INSERT).
INSERT INTO bench_floor (visible_at, body) VALUES (now(), :body);
