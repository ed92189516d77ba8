-- The extension, standard queue, full cycle, batch 1, every send with a
-- deduplication id (unique: client id and a per-client counter; the queue is
-- new for every run).  Variables: :queue, :body, :i (starts at 0).
\set i :i + 1
SELECT message_id FROM queue.send(:queue, :body::text,
                                  deduplication_id => :client_id::text || '-' || :i::text);
SELECT receipt FROM queue.receive(:queue) \gset
SELECT queue.delete(:queue, :receipt);
