-- plan_cache: queue.plan_cache_queues bounds the queues a backend keeps
-- prepared plans for.  Beyond it, the plans of the queue used longest ago
-- are freed (and made again when it is used again), never those of a queue
-- used in the current transaction.  Every call works the same either way.
-- planned(): how many queues this backend holds plans for, read from its
-- memory contexts (each kept plan's context names its queue's table).
CREATE EXTENSION IF NOT EXISTS queue;
-- The dedicated layout, whatever queue.default_storage the suite runs with:
-- it counts the per-queue plans of dedicated queues (a shared queue's plans are per kind: storage.sql).
SET queue.default_storage = dedicated;

CREATE FUNCTION pg_temp.planned() RETURNS bigint LANGUAGE sql AS $$
	SELECT count(DISTINCT substring(ident FROM 'queue_data\.q(\d+)'))
	FROM pg_backend_memory_contexts
	WHERE name = 'CachedPlanSource' AND ident ~ 'queue_data\.q\d+'
$$;

-- cycle(queue): send, receive, delete one message; its body.
CREATE FUNCTION pg_temp.cycle(q text) RETURNS text LANGUAGE sql AS $$
	SELECT r.body || ':' || queue.delete(q, r.receipt)
	FROM (SELECT * FROM queue.send(q, q || '-body')) s,
	     LATERAL queue.receive(q) r
$$;

SELECT count(queue.create('pc' || i)) AS created FROM generate_series(1, 4) i;
SHOW queue.plan_cache_queues;
SET queue.plan_cache_queues = 2;

-- one statement (one transaction) each: at most 2 queues keep plans
SELECT pg_temp.cycle('pc1');
SELECT pg_temp.cycle('pc2');
SELECT pg_temp.cycle('pc3');
SELECT pg_temp.cycle('pc4');
SELECT pg_temp.planned() AS planned_after_four;
-- a queue whose plans were freed works as before
SELECT pg_temp.cycle('pc1');
SELECT pg_temp.planned() AS planned_after_pc1_again;

-- in one transaction, no plan of a queue it used is freed
BEGIN;
SELECT pg_temp.cycle('pc1'), pg_temp.cycle('pc2'), pg_temp.cycle('pc3'), pg_temp.cycle('pc4');
SELECT pg_temp.planned() AS planned_in_one_transaction;
COMMIT;

-- 0: every queue keeps its plans
SET queue.plan_cache_queues = 0;
SELECT pg_temp.cycle('pc1'), pg_temp.cycle('pc2'), pg_temp.cycle('pc3'), pg_temp.cycle('pc4');
SELECT pg_temp.planned() AS planned_unbounded;
SET queue.plan_cache_queues = -1;

SELECT count(queue.drop('pc' || i)) AS dropped FROM generate_series(1, 4) i;
