-- The extension, standard queue, full cycle, batch n, every send with a
-- unique deduplication id.  Variables: :queue, :body, :batch, :i (from 0).
\set i :i + 1
SELECT count(*) FROM queue.send_batch(:queue, array_fill(:body::text, ARRAY[:batch::int]),
  deduplication_ids => ARRAY(SELECT :client_id::text || '-' || :i::text || '-' || s
                               FROM generate_series(1, :batch::int) AS s));
SELECT count(*) AS got, array_agg(receipt) AS receipts
  FROM queue.receive(:queue, max_messages => :batch::int) \gset
\if :got > 0
SELECT count(*) FROM queue.delete_batch(:queue, :receipts::text[]);
\endif
