-- The extension, FIFO queue, full cycle, batch n: send_batch of :batch
-- messages, each to a random one of :groups groups (drawn in the server:
-- pgbench makes no arrays) with a unique deduplication id; receive up to
-- :batch; delete_batch what came.  See fifo_cycle_b1.sql.
-- Variables: :queue, :body, :batch, :groups, :i (starts at 0).
\set i :i + 1
SELECT count(*) FROM queue.send_batch(:queue, array_fill(:body::text, ARRAY[:batch::int]),
  message_group_ids => ARRAY(SELECT 'g' || (1 + floor(random() * :groups::int))::int
                               FROM generate_series(1, :batch::int)),
  deduplication_ids => ARRAY(SELECT :client_id::text || '-' || :i::text || '-' || s
                               FROM generate_series(1, :batch::int) AS s));
SELECT count(*) AS got, array_agg(receipt) AS receipts
  FROM queue.receive(:queue, max_messages => :batch::int) \gset
\if :got > 0
SELECT count(*) FROM queue.delete_batch(:queue, :receipts::text[]);
\endif
