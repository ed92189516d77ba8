-- The extension, delete_batch alone, batch n: see std_delete_b1.sql.
\set lo :per * :client_id + :i * :batch + 1
\set hi :lo + :batch - 1
\set i :i + 1
SELECT count(*) FROM queue.delete_batch(:queue,
  ARRAY(SELECT receipt FROM bench_handles WHERE n BETWEEN :lo AND :hi));
