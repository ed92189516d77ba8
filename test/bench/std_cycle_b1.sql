-- The extension, standard queue, full cycle, batch 1: send, receive, delete
-- one message, each its own autocommit statement.  The receipt is carried by
-- \gset.  Run with -M prepared: each :variable is then bound as a parameter.
-- Variables: :queue (queue name), :body (message text).  A receive may come
-- back empty (every visible row it looked at was being leased by another
-- client: SKIP LOCKED); then there is nothing to delete.
SELECT message_id FROM queue.send(:queue, :body::text);
SELECT count(*) AS got, min(receipt) AS receipt FROM queue.receive(:queue) \gset
\if :got > 0
SELECT queue.delete(:queue, :receipt);
\endif
