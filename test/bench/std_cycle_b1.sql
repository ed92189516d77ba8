-- The extension, standard queue, full cycle, batch 1: send, receive, delete
-- one message, each its own autocommit statement.  The receipt is carried by
-- \gset.  Run with -M prepared: each :variable is then bound as a parameter.
-- Variables: :queue (queue name), :body (message text).
SELECT message_id FROM queue.send(:queue, :body::text);
SELECT receipt FROM queue.receive(:queue) \gset
SELECT queue.delete(:queue, :receipt);
