-- The extension, standard queue, full cycle, batch n: send_batch, receive up
-- to :batch, delete_batch with the receipts got, each its own autocommit
-- statement.  The receipts are aggregated into one text[] so \gset can carry
-- them.  Variables: :queue, :body, :batch.
SELECT count(*) FROM queue.send_batch(:queue, array_fill(:body::text, ARRAY[:batch::int]));
SELECT count(*) AS got, array_agg(receipt) AS receipts
  FROM queue.receive(:queue, max_messages => :batch::int) \gset
\if :got > 0
SELECT count(*) FROM queue.delete_batch(:queue, :receipts::text[]);
\endif
