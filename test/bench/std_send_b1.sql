-- The extension, send alone, batch 1.  Variables: :queue, :body.
SELECT message_id FROM queue.send(:queue, :body::text);
