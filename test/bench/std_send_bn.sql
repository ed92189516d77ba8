-- The extension, send_batch alone, batch n.  Variables: :queue, :body, :batch.
SELECT count(*) FROM queue.send_batch(:queue, array_fill(:body::text, ARRAY[:batch::int]));
