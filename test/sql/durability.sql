-- durability: a transaction whose only writes were receives commits
-- without waiting for its WAL flush (a lease lost in a crash only makes the
-- message visible again); anything else written in it, before, between or
-- after the receives, keeps the commit synchronous.  The extension says
-- which at DEBUG1, which is what this test reads.
CREATE EXTENSION IF NOT EXISTS queue;
SELECT queue.create('dur_q') > 0 AS created;
SELECT count(*) FROM queue.send_batch('dur_q', ARRAY['a', 'b', 'c', 'd', 'e', 'f']);
CREATE TABLE dur_side (n int);
SELECT queue.create('dur_empty') > 0 AS created;
SET client_min_messages = debug1;

-- a receive alone, autocommit: asynchronous
SELECT body FROM queue.receive('dur_q', visibility_timeout => '0');
-- two receives in one transaction: asynchronous
BEGIN;
SELECT count(*) FROM queue.receive('dur_q', visibility_timeout => '0');
SELECT count(*) FROM queue.receive('dur_q', visibility_timeout => '0');
COMMIT;
-- a receive that finds nothing wrote nothing: no commit to relax
SELECT count(*) FROM queue.receive('dur_empty');

-- a send: synchronous (sends are never relaxed)
SELECT count(*) FROM queue.send('dur_q', 'g');
-- receive then delete: the delete keeps the commit synchronous
BEGIN;
SELECT receipt AS r FROM queue.receive('dur_q', visibility_timeout => '1 h') \gset
SELECT queue.delete('dur_q', :'r');
COMMIT;
-- the caller's own write after the receive: synchronous
BEGIN;
SELECT count(*) FROM queue.receive('dur_q', visibility_timeout => '0');
INSERT INTO dur_side VALUES (1);
COMMIT;
-- the caller's own write before the receive: synchronous
BEGIN;
INSERT INTO dur_side VALUES (2);
SELECT count(*) FROM queue.receive('dur_q', visibility_timeout => '0');
COMMIT;
-- between two receives: synchronous
BEGIN;
SELECT count(*) FROM queue.receive('dur_q', visibility_timeout => '0');
INSERT INTO dur_side VALUES (3);
SELECT count(*) FROM queue.receive('dur_q', visibility_timeout => '0');
COMMIT;
-- a receive rolled back: nothing to commit
BEGIN;
SELECT count(*) FROM queue.receive('dur_q', visibility_timeout => '0');
ROLLBACK;

-- synchronous_commit already off: nothing to relax, nothing said
SET synchronous_commit = off;
SELECT count(*) FROM queue.receive('dur_q', visibility_timeout => '0');
RESET synchronous_commit;
-- queue.durable_receives = on: receives commit like anything else
SET queue.durable_receives = on;
SELECT count(*) FROM queue.receive('dur_q', visibility_timeout => '0');
RESET queue.durable_receives;
-- and the setting is the transaction's only: back to synchronous after
SHOW synchronous_commit;
SELECT count(*) FROM queue.receive('dur_q', visibility_timeout => '0');
SHOW synchronous_commit;

RESET client_min_messages;
SELECT count(*) AS side_rows FROM dur_side;
DROP TABLE dur_side;
SELECT queue.drop('dur_empty');
SELECT queue.drop('dur_q');
