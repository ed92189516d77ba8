-- The extension, receive alone (any batch): lease up to :batch messages for
-- the queue's visibility timeout (30 s).  run.sh fills the queue with more
-- than the run takes (pgbench -t).  Variables: :queue, :batch.
SELECT count(*) FROM queue.receive(:queue, max_messages => :batch::int);
