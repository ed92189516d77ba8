-- stats_locks: queue.stats reads every queue in one statement, and lets go
-- of the read locks on each queue's table and indexes once that queue is
-- read, so the view works with more queues than the lock table has slots
-- for (max_locks_per_transaction).  Locks the transaction took before are
-- kept.  read_locks(): the AccessShareLocks this backend holds on the
-- queues' tables and indexes.
CREATE EXTENSION IF NOT EXISTS queue;
-- The dedicated layout, whatever queue.default_storage the suite runs with:
-- it checks the locks queue.stats takes on a queue's own tables.
SET queue.default_storage = dedicated;

CREATE FUNCTION pg_temp.read_locks() RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(c.relname, ' ' ORDER BY c.relname), '(none)')
	FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
	WHERE l.locktype = 'relation' AND l.pid = pg_backend_pid()
	  AND l.mode = 'AccessShareLock'
	  AND c.relnamespace = 'queue_data'::regnamespace
$$;

SELECT count(*) FROM (SELECT queue.create('sl_' || i) FROM generate_series(1, 3) i) s;
SELECT count(*) FROM queue.send('sl_1', 'one');

-- The view's reads leave no lock behind.
BEGIN;
SELECT queue_name, visible FROM queue.stats WHERE queue_name LIKE 'sl\_%' ORDER BY 1;
SELECT pg_temp.read_locks();
COMMIT;

-- A lock taken by an earlier statement of the transaction stays.
BEGIN;
SELECT count(*) FROM queue.peek('sl_1');
SELECT pg_temp.read_locks() <> '(none)' AS peek_locked;
SELECT pg_temp.read_locks() AS before_stats \gset
SELECT queue_name, visible FROM queue.stats WHERE queue_name LIKE 'sl\_%' ORDER BY 1;
SELECT pg_temp.read_locks() = :'before_stats' AS same_locks;
COMMIT;

SELECT count(*) FROM (SELECT queue.drop('sl_' || i) FROM generate_series(1, 3) i) s;
