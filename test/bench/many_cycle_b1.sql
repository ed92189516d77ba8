-- The extension, standard queue, full cycle, batch 1, on a random queue of
-- many (test/bench/many.sh): send, receive, delete one message, each its
-- own autocommit statement, all three on queue 'm' || :q with :q drawn
-- from 1 .. :nq (nq = 1: the same script on one queue).
-- Variables: :nq (queues to spread over), :body (message text).
\set q random(1, :nq)
SELECT message_id FROM queue.send('m' || :q::text, :body::text);
SELECT receipt FROM queue.receive('m' || :q::text) \gset
SELECT queue.delete('m' || :q::text, :receipt);
