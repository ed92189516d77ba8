/* queue--1.4--1.5.sql: create and drop among 100,000 queues (issue 25) */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.5'" to load this file. \quit

/*
 * What a shared queue's create spends besides its commit went mostly to
 * interpreting: six interval checks in PL/pgSQL, each with its own
 * search_path, one of them wrapped in an SQL function planned afresh per
 * call, and a PL/pgSQL trigger that read the ACL of queue._queue_roles
 * through aclexplode for every row.  The same checks and the same trigger,
 * with the same messages and SQLSTATEs, in C (args.c, role_refs.c).
 * REVOKEs and comments of the replaced functions stay as they were.
 */

CREATE OR REPLACE FUNCTION @extschema@._check_interval(val interval, argname text, lo interval, hi interval)
	RETURNS void LANGUAGE C IMMUTABLE
	AS 'MODULE_PATHNAME', 'queue_check_interval_sql';

CREATE OR REPLACE FUNCTION @extschema@._check_retry_delay(retry_delay interval)
	RETURNS void LANGUAGE C IMMUTABLE
	AS 'MODULE_PATHNAME', 'queue_check_retry_delay_sql';

CREATE OR REPLACE FUNCTION @extschema@._queue_roles_trigger()
	RETURNS trigger LANGUAGE C SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp
	AS 'MODULE_PATHNAME', 'queue_queue_roles_trigger';

/*
 * A drop (and a forced one's sources) looks for the queues whose
 * dead-letter queue it is, three times: without an index each look read the
 * whole registry, which with 100,000 queues made a drop take some 25 ms.
 */
CREATE INDEX _queues_dead_letter_queue ON @extschema@._queues (dead_letter_queue)
	WHERE dead_letter_queue IS NOT NULL;

/*
 * queue.stats of a shared queue above 10,000 messages: 1.4 counted its
 * first 10,001 and stopped there.  Above that, as a dedicated queue's
 * counts are sampled from its table, a shared queue's are estimated from
 * its own rows without reading them all: its ids are spread over its id
 * range among other queues' (one sequence serves them all), so the rows in
 * 200 intervals of ids at random points of that range, each about 10 of
 * its messages wide at the density of its first 10,001, give its density,
 * so its size, and the counted rows' states split that size (each interval
 * reads at most 100 rows: some 2,000 in all, whatever the queue's size).
 * oldest_sent_at stays the least of the first 10,001 by id (1.1's takes
 * the 100 lowest ids and a sample).
 */
CREATE OR REPLACE FUNCTION @extschema@._depth_shared(store bigint, fifo boolean, retention interval,
	OUT visible bigint, OUT in_flight bigint, OUT delayed bigint,
	OUT oldest_sent_at timestamptz, OUT oldest_visible_age interval)
	LANGUAGE plpgsql SECURITY INVOKER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	now_ts timestamptz := pg_catalog.clock_timestamp();
	tbl text := CASE WHEN fifo THEN 'queue_data.fifo_messages' ELSE 'queue_data.messages' END;
	n bigint;
	lo bigint;
	hi bigint;
	tenth bigint;
	width bigint;
	est numeric;
	sv bigint;
	si bigint;
	sd bigint;
	sn bigint;
BEGIN
	EXECUTE pg_catalog.format($q$
		SELECT count(*) FILTER (WHERE m.visible_at <= $1),
			   count(*) FILTER (WHERE m.visible_at > $1 AND m.receive_count > 0),
			   count(*) FILTER (WHERE m.visible_at > $1 AND m.receive_count = 0),
			   min(m.sent_at), count(*), min(m.message_id), max(m.message_id)
		FROM (SELECT * FROM %s x WHERE x.store_id = $3 AND x.sent_at > $1 - $2
			  ORDER BY x.message_id LIMIT 10001) m$q$, tbl)
		INTO visible, in_flight, delayed, oldest_sent_at, n, lo, tenth
		USING now_ts, retention, store;
	IF n > 10000 THEN
		EXECUTE pg_catalog.format('SELECT max(x.message_id) FROM %s x WHERE x.store_id = $1', tbl)
			INTO hi USING store;
		width := greatest(1, pg_catalog.ceil(10.0 * (tenth - lo + 1) / n))::bigint;
		EXECUTE pg_catalog.format($q$
			WITH s AS (SELECT ($4 + pg_catalog.floor(pg_catalog.random() * ($5 - $4 + 1)))::bigint AS st
					   FROM pg_catalog.generate_series(1, 200)),
			w AS (SELECT y.*
				  FROM s, LATERAL (SELECT x.visible_at, x.receive_count, x.sent_at
								   FROM %s x WHERE x.store_id = $3 AND x.message_id >= s.st
									 AND x.message_id < s.st + $6
								   LIMIT 100) y)
			SELECT count(*)::numeric * ($5 - $4 + 1) / (200.0 * $6),
				   count(*) FILTER (WHERE w.sent_at > $1 - $2 AND w.visible_at <= $1),
				   count(*) FILTER (WHERE w.sent_at > $1 - $2 AND w.visible_at > $1 AND w.receive_count > 0),
				   count(*) FILTER (WHERE w.sent_at > $1 - $2 AND w.visible_at > $1 AND w.receive_count = 0),
				   count(*)
			FROM w$q$, tbl)
			INTO est, sv, si, sd, sn USING now_ts, retention, store, lo, hi, width;
		IF sn > 0 THEN
			/* never below what the first 10,001 already showed */
			visible := greatest(pg_catalog.round(est * sv / sn)::bigint, visible);
			in_flight := greatest(pg_catalog.round(est * si / sn)::bigint, in_flight);
			delayed := greatest(pg_catalog.round(est * sd / sn)::bigint, delayed);
		END IF;
	END IF;
	EXECUTE pg_catalog.format($q$
		SELECT $1 - m.sent_at FROM %s m
		WHERE m.store_id = $3 AND m.visible_at <= $1 AND m.sent_at > $1 - $2
		ORDER BY %s LIMIT 1$q$, tbl, CASE WHEN fifo THEN 'm.message_id' ELSE 'm.visible_at, m.message_id' END)
		INTO oldest_visible_age USING now_ts, retention, store;
END
$$;
