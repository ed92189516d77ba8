/* queue--1.12--1.13.sql: the visible_at index holds the messages without a priority (issue 51) */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.13'" to load this file. \quit

/*
 * A lease writes a new version of its row, and PostgreSQL inserts it into
 * every index of the table.  Since 1.12 a message stored with a priority
 * was in three (the key, visible_at, the priorities'), one without in two:
 * leases and sends of a queue with priorities cost a third more.  From
 * 1.13 the visible_at index holds only the messages whose priority is null
 * (a queue that never used priorities: all of them), and a prioritised
 * message is found through the priorities' index alone.  Every statement
 * that reads a queue in visible_at order reads both (storage/plans.c's
 * VISIBLE_ORDER; the plain lease reads the first only, fifo/priority.c).
 */
DROP INDEX queue_data.messages_visible;
CREATE INDEX messages_visible ON queue_data.messages (store_id, visible_at, message_id)
	WHERE priority IS NULL;

/*
 * A dedicated standard queue's table: the same (those there now, and each
 * one made from now on: _add_priority_column below).
 * queue_data is the extension's: no other role makes relations in it.
 */
CREATE FUNCTION @extschema@._plain_visible_index(queue_id bigint)
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
BEGIN
	IF EXISTS (SELECT FROM pg_catalog.pg_index i
			   WHERE i.indexrelid OPERATOR(pg_catalog.=)
					 pg_catalog.to_regclass(pg_catalog.format('queue_data.q%s_visible', queue_id))
				 AND i.indpred IS NULL)
	   AND EXISTS (SELECT FROM pg_catalog.pg_attribute a
				   WHERE a.attrelid OPERATOR(pg_catalog.=)
						 pg_catalog.to_regclass(pg_catalog.format('queue_data.q%s', queue_id))
					 AND a.attname OPERATOR(pg_catalog.=) 'priority' AND NOT a.attisdropped) THEN
		EXECUTE pg_catalog.format('DROP INDEX queue_data.q%s_visible', queue_id);
		EXECUTE pg_catalog.format('CREATE INDEX q%1$s_visible ON queue_data.q%1$s'
			' (visible_at, message_id) WHERE priority IS NULL', queue_id);
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._plain_visible_index(bigint) FROM PUBLIC;

DO $$
DECLARE
	r record;
BEGIN
	FOR r IN SELECT q.queue_id FROM @extschema@._queues q
			 WHERE q.dedicated AND NOT q.fifo ORDER BY q.queue_id LOOP
		PERFORM @extschema@._plain_visible_index(r.queue_id);
	END LOOP;
END
$$;

/*
 * 1.12's _add_priority_column, which every path that makes a dedicated
 * standard queue's table calls (a create, a move, a restore), then this.
 */
ALTER FUNCTION @extschema@._add_priority_column(bigint) RENAME TO _add_priority_column_1_12;
CREATE FUNCTION @extschema@._add_priority_column(queue_id bigint)
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
BEGIN
	PERFORM @extschema@._add_priority_column_1_12(queue_id);
	PERFORM @extschema@._plain_visible_index(queue_id);
END
$$;
REVOKE ALL ON FUNCTION @extschema@._add_priority_column(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@._add_priority_column_1_12(bigint) FROM PUBLIC;

/*
 * queue.stats's oldest_visible_age: the first visible message in
 * (visible_at, message_id) order, from each index (one descent for the
 * messages without a priority, one per level for the others).  tbl: a
 * standard queue's table with the priority column; store: the shared
 * table's key, or null for a dedicated table.
 */
CREATE FUNCTION @extschema@._oldest_visible_age(tbl text, store bigint,
	now_ts timestamptz, retention interval)
	RETURNS interval LANGUAGE plpgsql SECURITY INVOKER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	age interval;
	keyed text := CASE WHEN store IS NULL THEN ''
					   ELSE 'm.store_id OPERATOR(pg_catalog.=) $3 AND ' END;
BEGIN
	EXECUTE pg_catalog.format($q$
		SELECT $1 OPERATOR(pg_catalog.-) v.sent_at FROM (
		  (SELECT m.visible_at, m.message_id, m.sent_at FROM %1$s m
		   WHERE %2$sm.priority IS NULL AND m.visible_at OPERATOR(pg_catalog.<=) $1
			 AND m.sent_at OPERATOR(pg_catalog.>) ($1 OPERATOR(pg_catalog.-) $2)
		   ORDER BY m.visible_at, m.message_id LIMIT 1)
		  UNION ALL
		  (SELECT x.* FROM pg_catalog.unnest('{9,8,7,6,5,4,3,2,1,0}'::pg_catalog.int2[]) AS l(p)
		   CROSS JOIN LATERAL (SELECT m.visible_at, m.message_id, m.sent_at FROM %1$s m
			WHERE %2$sm.priority OPERATOR(pg_catalog.=) l.p
			  AND m.visible_at OPERATOR(pg_catalog.<=) $1
			  AND m.sent_at OPERATOR(pg_catalog.>) ($1 OPERATOR(pg_catalog.-) $2)
			ORDER BY m.priority, m.visible_at, m.message_id LIMIT 1) x)) v
		ORDER BY v.visible_at, v.message_id LIMIT 1$q$, tbl, keyed)
		INTO age USING now_ts, retention, store;
	RETURN age;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._oldest_visible_age(text, bigint, timestamptz, interval) FROM PUBLIC;

/* 1.1's _depth, its oldest_visible_age read from both indexes */
CREATE OR REPLACE FUNCTION @extschema@._depth(queue_id bigint, retention interval,
	OUT visible bigint, OUT in_flight bigint, OUT delayed bigint,
	OUT oldest_sent_at timestamptz, OUT oldest_visible_age interval)
	LANGUAGE plpgsql SECURITY INVOKER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	tbl text := pg_catalog.format('queue_data.q%s', queue_id);
	now_ts timestamptz := pg_catalog.clock_timestamp();
	total bigint;
	est real;
	pct float8;
BEGIN
	EXECUTE pg_catalog.format('SELECT count(*) FROM (SELECT 1 FROM %s LIMIT 10001) s', tbl) INTO total;
	IF total <= 10000 THEN
		EXECUTE pg_catalog.format($q$
			SELECT count(*) FILTER (WHERE visible_at <= $1),
				   count(*) FILTER (WHERE visible_at > $1 AND receive_count > 0),
				   count(*) FILTER (WHERE visible_at > $1 AND receive_count = 0),
				   min(sent_at)
			FROM %s WHERE sent_at > $1 - $2$q$, tbl)
			INTO visible, in_flight, delayed, oldest_sent_at USING now_ts, retention;
	ELSE
		SELECT c.reltuples INTO est FROM pg_catalog.pg_class c WHERE c.oid = tbl::regclass;
		pct := least(100.0, 100.0 * 10000 / greatest(est, 10000));
		EXECUTE pg_catalog.format($q$
			SELECT (count(*) FILTER (WHERE visible_at <= $1) * 100.0 / $3)::bigint,
				   (count(*) FILTER (WHERE visible_at > $1 AND receive_count > 0) * 100.0 / $3)::bigint,
				   (count(*) FILTER (WHERE visible_at > $1 AND receive_count = 0) * 100.0 / $3)::bigint,
				   min(sent_at)
			FROM %s TABLESAMPLE SYSTEM ($3) WHERE sent_at > $1 - $2$q$, tbl)
			INTO visible, in_flight, delayed, oldest_sent_at USING now_ts, retention, pct;
		EXECUTE pg_catalog.format($q$
			SELECT least($3, (SELECT min(sent_at) FROM (SELECT sent_at FROM %s
							  WHERE sent_at > $1 - $2 ORDER BY message_id LIMIT 100) h))$q$, tbl)
			INTO oldest_sent_at USING now_ts, retention, oldest_sent_at;
	END IF;
	IF EXISTS (SELECT FROM pg_catalog.pg_attribute a
			   WHERE a.attrelid OPERATOR(pg_catalog.=) tbl::regclass
				 AND a.attname OPERATOR(pg_catalog.=) 'priority' AND NOT a.attisdropped) THEN
		oldest_visible_age := @extschema@._oldest_visible_age(tbl, NULL, now_ts, retention);
	ELSE
		/* a FIFO queue's table: no priorities, and no visible_at index */
		EXECUTE pg_catalog.format($q$
			SELECT $1 - sent_at FROM %s WHERE visible_at <= $1 AND sent_at > $1 - $2
			ORDER BY visible_at, message_id LIMIT 1$q$, tbl)
			INTO oldest_visible_age USING now_ts, retention;
	END IF;
END
$$;

/* 1.5's _depth_shared, its oldest_visible_age the same way */
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
	IF fifo THEN
		EXECUTE pg_catalog.format($q$
			SELECT $1 - m.sent_at FROM %s m
			WHERE m.store_id = $3 AND m.visible_at <= $1 AND m.sent_at > $1 - $2
			ORDER BY m.message_id LIMIT 1$q$, tbl)
			INTO oldest_visible_age USING now_ts, retention, store;
	ELSE
		oldest_visible_age := @extschema@._oldest_visible_age(tbl, store, now_ts, retention);
	END IF;
END
$$;
