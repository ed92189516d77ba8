-- The extension, FIFO queue, full cycle, batch 1: send to a random one of
-- :groups message groups with a unique deduplication id, receive, delete.
-- A receive can find nothing (every group with messages is in flight at
-- other clients, likely with few groups), so the delete is skipped then;
-- run.sh counts the messages deleted, not the cycles.
-- Variables: :queue, :body, :groups, :i (starts at 0).
\set i :i + 1
\set g random(1, :groups)
SELECT message_id FROM queue.send(:queue, :body::text, message_group_id => 'g' || :g::text,
                                  deduplication_id => :client_id::text || '-' || :i::text);
SELECT count(*) AS got, min(receipt) AS receipt FROM queue.receive(:queue) \gset
\if :got > 0
SELECT queue.delete(:queue, :receipt);
\endif
