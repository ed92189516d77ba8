-- The extension, standard queue, batch 1: send, receive, delete one message,
-- each its own autocommit statement.  The receipt is carried by \gset.
-- Run with -M prepared (or extended): each :variable is then bound as a
-- parameter, so receipts and ids need no quoting.
-- Variables: :queue (queue name), :body (message text).
SELECT message_id FROM queue.send(:queue, :body::text);
SELECT receipt FROM queue.receive(:queue) \gset
SELECT queue.delete(:queue, :receipt);
