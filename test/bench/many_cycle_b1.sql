-- The extension, standard queue, full cycle, batch 1, on a random queue of
-- many (test/bench/many.sh): send, receive, delete one message, each its
-- own autocommit statement, all three on queue 'm' || :q with :q drawn
-- from 1 .. :nq (nq = 1: the same script on one queue).  A receive that
-- comes back empty (rare: about once in 300,000 cycles with 4 clients on
-- one queue holding 100 visible messages) deletes nothing; many.sh counts
-- those from the queues' counters.
-- Variables: :nq (queues to spread over), :body (message text).
\set q random(1, :nq)
SELECT message_id FROM queue.send('m' || :q::text, :body::text);
SELECT count(*) AS got, max(receipt) AS receipt FROM queue.receive('m' || :q::text) \gset
\if :got
SELECT queue.delete('m' || :q::text, :receipt);
\endif
