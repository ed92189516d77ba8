/* queue--1.8--1.9.sql */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.9'" to load this file. \quit

/*
 * Statistics that do not lie about the shared tables' keys (issue 38).
 * ANALYZE of a shared table under a long-held snapshot samples a few live
 * rows among tens of thousands of dead ones, finds every value of its key
 * column (store_id, queue_id) distinct and records it as unique; a plan
 * made again after it (plans are kept, and made again after every ANALYZE)
 * then took "store_id = $n" for one row and read a store's whole key range
 * to find ten message ids.  A key column's number of distinct values is
 * fixed at one here, the case the plans must survive: a store holds every
 * row.  (storage/plans.c also plans every queue_data table as a large one.)
 */
ALTER TABLE queue_data.messages ALTER COLUMN store_id SET (n_distinct = 1);
ALTER TABLE queue_data.fifo_messages ALTER COLUMN store_id SET (n_distinct = 1);
ALTER TABLE queue_data.groups ALTER COLUMN store_id SET (n_distinct = 1);
ALTER TABLE queue_data.dedup_ids ALTER COLUMN queue_id SET (n_distinct = 1);
ALTER TABLE queue_data.receive_attempts ALTER COLUMN queue_id SET (n_distinct = 1);

/* ======================================================================
 * Citus: the extension's own move of queues between nodes (issue 37,
 * docs/citus.md "Moving queues between nodes").
 *
 * A queue lives on the node that holds its shard of the anchor,
 * queue_citus.placements, and its tables are that node's own: Citus's
 * shard moves do not carry them, so they are refused for the anchor
 * (storage/citus.c).  queue.citus_move_shard moves a shard's queues with
 * it, in steps each node runs on its own (run_command_on_all_nodes):
 *
 *   announce  the target notes the shard as coming in (queue._citus_moves,
 *             'in'), which lets Citus create the anchor's shard there;
 *   out       the source takes every queue, topic and consumer of the
 *             shard under its lock, writes them (rows as JSON) into its
 *             shard of queue_citus.moving, a table colocated with the
 *             anchor, deletes them, and notes the shard as going out;
 *   check     the target checks that what comes can be made there (its
 *             names free, its roles and handlers present);
 *   move      Citus's citus_move_shard_placement (block_writes) moves the
 *             anchor's shard and, with it, queue_citus.moving's and the
 *             application's colocated shards;
 *   in        the target makes the queues from its shard of
 *             queue_citus.moving and forgets the move;
 *   done      the source forgets it.
 *
 * While the shard is noted on a node (out or in), every call on its queues
 * there is refused with 55006 (storage/citus.c), so nothing of them
 * changes during the move.  A failure before the move's end undoes it on
 * the source: the queues come back as they were, with their ids, so their
 * receipts stay valid.  On the target, receipts issued before the move are
 * stale (55000; queue._citus_moved_in, common/receipt.c).
 * ====================================================================== */

/* The shards being moved to ('in') or from ('out') this node. */
CREATE TABLE @extschema@._citus_moves (
	shard_id bigint PRIMARY KEY,
	direction text NOT NULL CHECK (direction IN ('in', 'out')),
	peer_group integer NOT NULL,
	started_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
REVOKE ALL ON @extschema@._citus_moves FROM PUBLIC;
COMMENT ON TABLE @extschema@._citus_moves IS
	'shards of queue_citus.placements whose queues are being moved to or from this node (queue.citus_move_shard)';

/* The queues that came to this node, and the ids they had on their old node. */
CREATE TABLE @extschema@._citus_moved_in (
	queue_id bigint PRIMARY KEY REFERENCES @extschema@._queues (queue_id) ON DELETE CASCADE,
	from_queue_id bigint NOT NULL,
	from_group integer NOT NULL,
	moved_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
REVOKE ALL ON @extschema@._citus_moved_in FROM PUBLIC;
COMMENT ON TABLE @extschema@._citus_moved_in IS
	'queues moved to this node by queue.citus_move_shard, with their ids on the old node (their receipts are stale)';

/* Refuse anyone but a superuser (every function of the move is one). */
CREATE FUNCTION @extschema@._citus_move_superuser(what text)
	RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user) THEN
		RAISE EXCEPTION '% must be run by a superuser', what USING ERRCODE = '42501';
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._citus_move_superuser(text) FROM PUBLIC;

/* Refuse, but on the coordinator of a cluster queue.citus_setup() set up (55000). */
CREATE FUNCTION @extschema@._citus_check_coordinator(what text)
	RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'citus')
	   OR pg_catalog.to_regclass('queue_citus.placements') IS NULL THEN
		RAISE EXCEPTION 'this database is not set up for queues on Citus' USING ERRCODE = '55000',
			HINT = 'Call queue.citus_setup() on the coordinator first.';
	END IF;
	IF (SELECT l.groupid FROM pg_catalog.pg_dist_local_group l) OPERATOR(pg_catalog.<>) 0 THEN
		RAISE EXCEPTION '% must be run on the coordinator', what USING ERRCODE = '55000';
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._citus_check_coordinator(text) FROM PUBLIC;

/*
 * This node's shard of queue_citus.moving beside the anchor's shard_id
 * (the one of the same hash range), as a regclass; an error when there is
 * none here.
 */
CREATE FUNCTION @extschema@._citus_staging_shard(shard_id bigint)
	RETURNS regclass LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	sid bigint;
	rel regclass;
BEGIN
	SELECT s2.shardid INTO sid
	FROM pg_catalog.pg_dist_shard s1
	JOIN pg_catalog.pg_dist_shard s2
	  ON s2.logicalrelid OPERATOR(pg_catalog.=) 'queue_citus.moving'::pg_catalog.regclass
	 AND s2.shardminvalue OPERATOR(pg_catalog.=) s1.shardminvalue
	WHERE s1.shardid OPERATOR(pg_catalog.=) shard_id
	  AND s1.logicalrelid OPERATOR(pg_catalog.=) 'queue_citus.placements'::pg_catalog.regclass;
	rel := pg_catalog.to_regclass('queue_citus.moving_' OPERATOR(pg_catalog.||) sid);
	IF rel IS NULL THEN
		RAISE EXCEPTION 'this node holds no shard of queue_citus.moving beside shard % of queue_citus.placements', shard_id
			USING ERRCODE = '55000';
	END IF;
	RETURN rel;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._citus_staging_shard(bigint) FROM PUBLIC;

/* Whether a name (queue, topic or consumer) is placed in the anchor's shard_id. */
CREATE FUNCTION @extschema@._citus_in_shard(name text, shard_id bigint)
	RETURNS boolean LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp
AS $$
	SELECT pg_catalog.get_shard_id_for_distribution_column('queue_citus.placements'::pg_catalog.regclass,
		name::queue.placement_key) OPERATOR(pg_catalog.=) shard_id
$$;
REVOKE ALL ON FUNCTION @extschema@._citus_in_shard(text, bigint) FROM PUBLIC;

/*
 * out: pack the shard's queues, topics and consumers into this node's
 * shard of queue_citus.moving and delete them here, in one transaction,
 * each queue under its lock.  Returns what was packed: counts, and the
 * names, roles and handlers the target must check.
 */
CREATE FUNCTION @extschema@._citus_pack(shard_id bigint, target_group integer)
	RETURNS jsonb LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
	staging regclass := queue._citus_staging_shard(shard_id);
	ids bigint[];
	topic_ids bigint[];
	consumer_ids bigint[];
	bad text;
	q queue._queues;
	n_messages bigint := 0;
	n bigint;
BEGIN
	IF EXISTS (SELECT FROM queue._citus_moves m WHERE m.shard_id OPERATOR(pg_catalog.=) shard_id) THEN
		RAISE EXCEPTION 'shard % of queue_citus.placements is already being moved', shard_id
			USING ERRCODE = '55006';
	END IF;
	/* from here on, every call on the shard's names is refused (55006) */
	INSERT INTO queue._citus_moves (shard_id, direction, peer_group) VALUES (shard_id, 'out', target_group);
	EXECUTE pg_catalog.format('SELECT count(*) FROM %s', staging) INTO n;
	IF n OPERATOR(pg_catalog.<>) 0 THEN
		RAISE EXCEPTION 'shard % of queue_citus.moving is not empty', staging USING ERRCODE = '55000';
	END IF;

	SELECT coalesce(pg_catalog.array_agg(r.queue_id ORDER BY r.queue_id), '{}') INTO ids
	FROM queue._queues r WHERE queue._citus_in_shard(r.queue_name, shard_id);
	SELECT coalesce(pg_catalog.array_agg(t.topic_id ORDER BY t.topic_id), '{}') INTO topic_ids
	FROM queue._topics t WHERE queue._citus_in_shard(t.topic_name, shard_id);
	SELECT coalesce(pg_catalog.array_agg(c.consumer_id ORDER BY c.consumer_id), '{}') INTO consumer_ids
	FROM queue._consumers c WHERE queue._citus_in_shard(c.consumer_name, shard_id);

	/* What must share a node must move together: refuse a move that would split it. */
	SELECT pg_catalog.string_agg(pg_catalog.format('%s (dead-letter queue %s)', a.queue_name, b.queue_name), ', ') INTO bad
	FROM queue._queues a JOIN queue._queues b ON b.queue_id OPERATOR(pg_catalog.=) a.dead_letter_queue
	WHERE (a.queue_id OPERATOR(pg_catalog.=) ANY (ids)) OPERATOR(pg_catalog.<>) (b.queue_id OPERATOR(pg_catalog.=) ANY (ids));
	IF bad IS NULL THEN
		SELECT pg_catalog.string_agg(pg_catalog.format('topic %s (subscribed queue %s)', t.topic_name, r.queue_name), ', ') INTO bad
		FROM queue._subscriptions s
		JOIN queue._topics t ON t.topic_id OPERATOR(pg_catalog.=) s.topic_id
		JOIN queue._queues r ON r.queue_id OPERATOR(pg_catalog.=) s.queue_id
		WHERE (t.topic_id OPERATOR(pg_catalog.=) ANY (topic_ids)) OPERATOR(pg_catalog.<>) (r.queue_id OPERATOR(pg_catalog.=) ANY (ids));
	END IF;
	IF bad IS NULL THEN
		SELECT pg_catalog.string_agg(pg_catalog.format('consumer %s (queue %s)', c.consumer_name, r.queue_name), ', ') INTO bad
		FROM queue._consumers c JOIN queue._queues r ON r.queue_id OPERATOR(pg_catalog.=) c.queue_id
		WHERE (c.consumer_id OPERATOR(pg_catalog.=) ANY (consumer_ids)) OPERATOR(pg_catalog.<>) (r.queue_id OPERATOR(pg_catalog.=) ANY (ids));
	END IF;
	IF bad IS NULL THEN
		SELECT pg_catalog.string_agg(pg_catalog.format('message move task %s', m.task_handle), ', ') INTO bad
		FROM queue._move_tasks m
		WHERE m.status OPERATOR(pg_catalog.=) 'RUNNING'
		  AND (m.source_queue_id OPERATOR(pg_catalog.=) ANY (ids) OR m.destination_queue_id OPERATOR(pg_catalog.=) ANY (ids));
	END IF;
	IF bad IS NOT NULL THEN
		RAISE EXCEPTION 'the queues of shard % cannot move without what must share their node', shard_id
			USING ERRCODE = '55000',
			DETAIL = 'Placed in another shard, or running: ' OPERATOR(pg_catalog.||) bad OPERATOR(pg_catalog.||) '.',
			HINT = 'Give a queue''s dead-letter queue, topic subscriptions and consumers its tenant key, and wait for its message move tasks.';
	END IF;

	/* Every queue in the shared layout, under its lock (calls on it wait, then are refused). */
	FOR q IN SELECT * FROM queue._queues r WHERE r.queue_id OPERATOR(pg_catalog.=) ANY (ids) ORDER BY r.queue_id LOOP
		IF q.dedicated THEN
			PERFORM queue._move(q.queue_name, false);
			EXECUTE pg_catalog.format('INSERT INTO %s VALUES ($1, ''dedicated'', $2, ''{}'')', staging)
				USING q.queue_name, q.queue_id;
		ELSE
			PERFORM queue._lock_queue(q.queue_id);
		END IF;
	END LOOP;

	FOR q IN SELECT * FROM queue._queues r WHERE r.queue_id OPERATOR(pg_catalog.=) ANY (ids) ORDER BY r.queue_id LOOP
		EXECUTE pg_catalog.format('INSERT INTO %s VALUES ($1, ''queue'', $2, $3)', staging)
			USING q.queue_name, q.queue_id, pg_catalog.to_jsonb(q);
		EXECUTE pg_catalog.format('INSERT INTO %s SELECT $1, ''message'', $2, pg_catalog.to_jsonb(m) FROM %s m '
			'WHERE m.store_id OPERATOR(pg_catalog.=) $3',
			staging, CASE WHEN q.fifo THEN 'queue_data.fifo_messages' ELSE 'queue_data.messages' END)
			USING q.queue_name, q.queue_id, coalesce(q.store_id, q.queue_id);
		GET DIAGNOSTICS n = ROW_COUNT;
		n_messages := n_messages OPERATOR(pg_catalog.+) n;
		EXECUTE pg_catalog.format('INSERT INTO %s SELECT $1, ''group'', $2, pg_catalog.to_jsonb(g) FROM queue_data.groups g '
			'WHERE g.store_id OPERATOR(pg_catalog.=) $3', staging)
			USING q.queue_name, q.queue_id, coalesce(q.store_id, q.queue_id);
		EXECUTE pg_catalog.format('INSERT INTO %s SELECT $1, ''dedup'', $2, pg_catalog.to_jsonb(d) FROM queue_data.dedup_ids d '
			'WHERE d.queue_id OPERATOR(pg_catalog.=) $2', staging)
			USING q.queue_name, q.queue_id;
		EXECUTE pg_catalog.format('INSERT INTO %s SELECT $1, ''attempt'', $2, pg_catalog.to_jsonb(a) FROM queue_data.receive_attempts a '
			'WHERE a.queue_id OPERATOR(pg_catalog.=) $2', staging)
			USING q.queue_name, q.queue_id;
		EXECUTE pg_catalog.format('INSERT INTO %s SELECT $1, ''sqs'', $2, pg_catalog.to_jsonb(s) FROM queue._sqs_attributes s '
			'WHERE s.queue_id OPERATOR(pg_catalog.=) $2', staging)
			USING q.queue_name, q.queue_id;
	END LOOP;
	/* a topic with its table's owner and grants (the topic's), and its deduplication ids */
	EXECUTE pg_catalog.format('INSERT INTO %s SELECT t.topic_name, ''topic'', t.topic_id, pg_catalog.to_jsonb(t) '
		'OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(''owner'', c.relowner::pg_catalog.regrole::text, ''acl'', c.relacl::text) '
		'FROM queue._topics t JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) '
		'pg_catalog.format(''queue_data.t%%s'', t.topic_id)::pg_catalog.regclass '
		'WHERE t.topic_id OPERATOR(pg_catalog.=) ANY ($1)', staging) USING topic_ids;
	FOR n IN SELECT x FROM pg_catalog.unnest(topic_ids) x LOOP
		EXECUTE pg_catalog.format('INSERT INTO %s SELECT t.topic_name, ''topic_dedup'', t.topic_id, pg_catalog.to_jsonb(d) '
			'FROM queue._topics t, queue_data.t%s d WHERE t.topic_id OPERATOR(pg_catalog.=) $1', staging, n) USING n;
	END LOOP;
	EXECUTE pg_catalog.format('INSERT INTO %s SELECT r.queue_name, ''subscription'', s.queue_id, pg_catalog.to_jsonb(s) '
		'FROM queue._subscriptions s JOIN queue._queues r ON r.queue_id OPERATOR(pg_catalog.=) s.queue_id '
		'WHERE s.queue_id OPERATOR(pg_catalog.=) ANY ($1)', staging) USING ids;
	EXECUTE pg_catalog.format('INSERT INTO %s SELECT c.consumer_name, ''consumer'', c.queue_id, pg_catalog.to_jsonb(c) '
		'FROM queue._consumers c WHERE c.consumer_id OPERATOR(pg_catalog.=) ANY ($1)', staging) USING consumer_ids;

	/* Gone from here, with every row (no reclaim: an undo puts them back at once). */
	FOR q IN SELECT * FROM queue._queues r WHERE r.queue_id OPERATOR(pg_catalog.=) ANY (ids) ORDER BY r.queue_id LOOP
		IF q.fifo THEN
			DELETE FROM queue_data.fifo_messages m WHERE m.store_id OPERATOR(pg_catalog.=) coalesce(q.store_id, q.queue_id);
			DELETE FROM queue_data.groups g WHERE g.store_id OPERATOR(pg_catalog.=) coalesce(q.store_id, q.queue_id);
		ELSE
			DELETE FROM queue_data.messages m WHERE m.store_id OPERATOR(pg_catalog.=) coalesce(q.store_id, q.queue_id);
		END IF;
		DELETE FROM queue_data.dedup_ids d WHERE d.queue_id OPERATOR(pg_catalog.=) q.queue_id;
		DELETE FROM queue_data.receive_attempts a WHERE a.queue_id OPERATOR(pg_catalog.=) q.queue_id;
	END LOOP;
	DELETE FROM queue._consumers c WHERE c.consumer_id OPERATOR(pg_catalog.=) ANY (consumer_ids);
	PERFORM queue._drop_topic(t.topic_name, false, (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user))
	FROM queue._topics t WHERE t.topic_id OPERATOR(pg_catalog.=) ANY (topic_ids);
	UPDATE queue._queues r SET dead_letter_queue = NULL WHERE r.queue_id OPERATOR(pg_catalog.=) ANY (ids);
	DELETE FROM queue._queues r WHERE r.queue_id OPERATOR(pg_catalog.=) ANY (ids);
	PERFORM queue._reset_counters(x, true) FROM pg_catalog.unnest(ids) x;
	PERFORM queue._invalidate_shared();
	PERFORM queue._invalidate('queue._queues'::pg_catalog.regclass);
	PERFORM queue._invalidate('queue._consumers'::pg_catalog.regclass);
	PERFORM queue._invalidate('queue._topics'::pg_catalog.regclass);

	RETURN pg_catalog.jsonb_build_object(
		'queues', pg_catalog.cardinality(ids), 'messages', n_messages,
		'topics', pg_catalog.cardinality(topic_ids), 'consumers', pg_catalog.cardinality(consumer_ids));
END
$$;
REVOKE ALL ON FUNCTION @extschema@._citus_pack(bigint, integer) FROM PUBLIC;

/* Grant on rel what acl (an aclitem[] as text) grants to others than rel's owner. */
CREATE FUNCTION @extschema@._citus_grant_acl(rel regclass, acl text)
	RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	g record;
BEGIN
	IF acl IS NULL OR pg_catalog.cardinality(acl::pg_catalog.aclitem[]) OPERATOR(pg_catalog.=) 0 THEN
		RETURN;
	END IF;
	FOR g IN SELECT x.privilege_type, x.grantee FROM pg_catalog.aclexplode(acl::pg_catalog.aclitem[]) x
			 WHERE x.grantee OPERATOR(pg_catalog.<>) (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) rel) LOOP
		EXECUTE pg_catalog.format('GRANT %s ON TABLE %s TO %s', g.privilege_type, rel,
			CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE g.grantee::pg_catalog.regrole::text END);
	END LOOP;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._citus_grant_acl(regclass, text) FROM PUBLIC;

/*
 * in (keep_ids false, on the target) or undo (keep_ids true, on the
 * source): make the queues, topics and consumers packed in this node's
 * shard of queue_citus.moving, and empty it.  With keep_ids the rows come
 * back with the ids they had (receipts stay valid); without, they take new
 * ids of this node, the old ones noted in queue._citus_moved_in, and this
 * node's message ids continue above the messages'.  Returns the counts.
 */
CREATE FUNCTION @extschema@._citus_unpack(shard_id bigint, keep_ids boolean, from_group integer)
	RETURNS jsonb LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
	staging regclass := queue._citus_staging_shard(shard_id);
	r record;
	q queue._queues;
	map jsonb := '{}';
	tmap jsonb := '{}';
	new_id bigint;
	n_queues integer := 0;
	n_messages bigint := 0;
	n bigint;
	max_id bigint;
BEGIN
	/* the queues, without their dead-letter queues first */
	FOR r IN EXECUTE pg_catalog.format('SELECT queue_id, data FROM %s WHERE kind OPERATOR(pg_catalog.=) ''queue'' ORDER BY queue_id', staging) LOOP
		new_id := CASE WHEN keep_ids THEN r.queue_id
					   ELSE pg_catalog.nextval(pg_catalog.pg_get_serial_sequence('queue._queues', 'queue_id')) END;
		map := map OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(r.queue_id::text, new_id);
		q := pg_catalog.jsonb_populate_record(NULL::queue._queues, r.data);
		q.queue_id := new_id;
		q.dead_letter_queue := NULL;
		IF NOT keep_ids THEN
			q.store_id := NULL;
		END IF;
		INSERT INTO queue._queues OVERRIDING SYSTEM VALUE SELECT q.*;
		PERFORM queue._reset_counters(new_id, false);
		IF NOT keep_ids THEN
			INSERT INTO queue._citus_moved_in (queue_id, from_queue_id, from_group) VALUES (new_id, r.queue_id, from_group);
		END IF;
		n_queues := n_queues OPERATOR(pg_catalog.+) 1;
	END LOOP;
	FOR r IN EXECUTE pg_catalog.format('SELECT queue_id, data FROM %s WHERE kind OPERATOR(pg_catalog.=) ''queue'' '
			'AND data OPERATOR(pg_catalog.->>) ''dead_letter_queue'' IS NOT NULL', staging) LOOP
		UPDATE queue._queues x SET dead_letter_queue = (map OPERATOR(pg_catalog.->>) (r.data OPERATOR(pg_catalog.->>) 'dead_letter_queue'))::bigint
		WHERE x.queue_id OPERATOR(pg_catalog.=) (map OPERATOR(pg_catalog.->>) r.queue_id::text)::bigint;
	END LOOP;

	/* their rows, under their new ids */
	FOR r IN SELECT k::bigint AS old_id, (map OPERATOR(pg_catalog.->>) k)::bigint AS new_id FROM pg_catalog.jsonb_object_keys(map) k LOOP
		SELECT * INTO q FROM queue._queues x WHERE x.queue_id OPERATOR(pg_catalog.=) r.new_id;
		EXECUTE pg_catalog.format('INSERT INTO %s SELECT (pg_catalog.jsonb_populate_record(NULL::%s, s.data '
			'OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(''store_id'', $2, ''source_queue_id'', '
			'$3 OPERATOR(pg_catalog.->) (s.data OPERATOR(pg_catalog.->>) ''source_queue_id'')))).* '
			'FROM %s s WHERE s.kind OPERATOR(pg_catalog.=) ''message'' AND s.queue_id OPERATOR(pg_catalog.=) $1',
			CASE WHEN q.fifo THEN 'queue_data.fifo_messages' ELSE 'queue_data.messages' END,
			CASE WHEN q.fifo THEN 'queue_data.fifo_messages' ELSE 'queue_data.messages' END, staging)
			USING r.old_id, coalesce(q.store_id, q.queue_id), map;
		GET DIAGNOSTICS n = ROW_COUNT;
		n_messages := n_messages OPERATOR(pg_catalog.+) n;
		EXECUTE pg_catalog.format('INSERT INTO queue_data.groups SELECT (pg_catalog.jsonb_populate_record(NULL::queue_data.groups, s.data '
			'OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(''store_id'', $2))).* '
			'FROM %s s WHERE s.kind OPERATOR(pg_catalog.=) ''group'' AND s.queue_id OPERATOR(pg_catalog.=) $1', staging)
			USING r.old_id, coalesce(q.store_id, q.queue_id);
		EXECUTE pg_catalog.format('INSERT INTO queue_data.dedup_ids SELECT (pg_catalog.jsonb_populate_record(NULL::queue_data.dedup_ids, s.data '
			'OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(''queue_id'', $2))).* '
			'FROM %s s WHERE s.kind OPERATOR(pg_catalog.=) ''dedup'' AND s.queue_id OPERATOR(pg_catalog.=) $1', staging)
			USING r.old_id, r.new_id;
		EXECUTE pg_catalog.format('INSERT INTO queue_data.receive_attempts SELECT (pg_catalog.jsonb_populate_record(NULL::queue_data.receive_attempts, s.data '
			'OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(''queue_id'', $2))).* '
			'FROM %s s WHERE s.kind OPERATOR(pg_catalog.=) ''attempt'' AND s.queue_id OPERATOR(pg_catalog.=) $1', staging)
			USING r.old_id, r.new_id;
		EXECUTE pg_catalog.format('INSERT INTO queue._sqs_attributes SELECT (pg_catalog.jsonb_populate_record(NULL::queue._sqs_attributes, s.data '
			'OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(''queue_id'', $2))).* '
			'FROM %s s WHERE s.kind OPERATOR(pg_catalog.=) ''sqs'' AND s.queue_id OPERATOR(pg_catalog.=) $1', staging)
			USING r.old_id, r.new_id;
	END LOOP;

	/* topics, their subscriptions and the consumers */
	FOR r IN EXECUTE pg_catalog.format('SELECT queue_id, data FROM %s WHERE kind OPERATOR(pg_catalog.=) ''topic''', staging) LOOP
		/* made as create_topic makes it (a new id), then given its owner, grants and ids */
		new_id := queue._create_topic(r.data OPERATOR(pg_catalog.->>) 'topic_name', (r.data OPERATOR(pg_catalog.->>) 'fifo')::boolean,
			r.data OPERATOR(pg_catalog.->) 'tags', (SELECT x.oid FROM pg_catalog.pg_roles x WHERE x.rolname OPERATOR(pg_catalog.=) current_user));
		tmap := tmap OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(r.queue_id::text, new_id);
		UPDATE queue._topics t SET created_at = (r.data OPERATOR(pg_catalog.->>) 'created_at')::timestamptz
		WHERE t.topic_id OPERATOR(pg_catalog.=) new_id;
		EXECUTE pg_catalog.format('ALTER TABLE queue_data.t%s OWNER TO %s', new_id,
			(r.data OPERATOR(pg_catalog.->>) 'owner')::pg_catalog.regrole);
		PERFORM queue._citus_grant_acl(pg_catalog.format('queue_data.t%s', new_id)::pg_catalog.regclass,
			r.data OPERATOR(pg_catalog.->>) 'acl');
		EXECUTE pg_catalog.format('INSERT INTO queue_data.t%s SELECT (pg_catalog.jsonb_populate_record(NULL::queue_data.t%s, s.data)).* '
			'FROM %s s WHERE s.kind OPERATOR(pg_catalog.=) ''topic_dedup'' AND s.queue_id OPERATOR(pg_catalog.=) $1',
			new_id, new_id, staging) USING r.queue_id;
	END LOOP;
	EXECUTE pg_catalog.format('INSERT INTO queue._subscriptions OVERRIDING SYSTEM VALUE SELECT (pg_catalog.jsonb_populate_record(NULL::queue._subscriptions, s.data '
		'OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(''subscription_id'', CASE WHEN $3 THEN (s.data OPERATOR(pg_catalog.->>) ''subscription_id'')::bigint '
		'ELSE pg_catalog.nextval(pg_catalog.pg_get_serial_sequence(''queue._subscriptions'', ''subscription_id'')) END, '
		'''topic_id'', $2 OPERATOR(pg_catalog.->) (s.data OPERATOR(pg_catalog.->>) ''topic_id''), '
		'''queue_id'', $1 OPERATOR(pg_catalog.->) (s.data OPERATOR(pg_catalog.->>) ''queue_id'')))).* '
		'FROM %s s WHERE s.kind OPERATOR(pg_catalog.=) ''subscription''', staging)
		USING map, tmap, keep_ids;
	PERFORM queue._topic_counter_reset(x.topic_id, x.subscription_id, false)
	FROM queue._subscriptions x WHERE x.topic_id::text OPERATOR(pg_catalog.=) ANY (ARRAY(
		SELECT tmap OPERATOR(pg_catalog.->>) k FROM pg_catalog.jsonb_object_keys(tmap) k));
	EXECUTE pg_catalog.format('INSERT INTO queue._consumers OVERRIDING SYSTEM VALUE SELECT (pg_catalog.jsonb_populate_record(NULL::queue._consumers, s.data '
		'OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(''consumer_id'', CASE WHEN $2 THEN (s.data OPERATOR(pg_catalog.->>) ''consumer_id'')::bigint '
		'ELSE pg_catalog.nextval(pg_catalog.pg_get_serial_sequence(''queue._consumers'', ''consumer_id'')) END, '
		'''queue_id'', $1 OPERATOR(pg_catalog.->) (s.data OPERATOR(pg_catalog.->>) ''queue_id'')))).* '
		'FROM %s s WHERE s.kind OPERATOR(pg_catalog.=) ''consumer''', staging)
		USING map, keep_ids;

	/* this node's message ids (and FIFO sequence numbers) continue above those that came */
	IF NOT keep_ids THEN
		EXECUTE pg_catalog.format('SELECT max((data OPERATOR(pg_catalog.->>) ''message_id'')::bigint) FROM %s '
			'WHERE kind OPERATOR(pg_catalog.=) ''message''', staging) INTO max_id;
		IF max_id IS NOT NULL THEN
			PERFORM pg_catalog.setval('queue_data.message_id_seq'::pg_catalog.regclass,
				GREATEST(max_id, (SELECT s.last_value FROM queue_data.message_id_seq s)));
		END IF;
	END IF;

	/* dedicated queues get their own tables back */
	FOR r IN EXECUTE pg_catalog.format('SELECT s.queue_id, x.queue_name, x.fifo FROM %s s '
			'JOIN queue._queues x ON x.queue_id OPERATOR(pg_catalog.=) ($1 OPERATOR(pg_catalog.->>) s.queue_id::text)::bigint '
			'WHERE s.kind OPERATOR(pg_catalog.=) ''dedicated''', staging) USING map LOOP
		PERFORM queue._move(r.queue_name, true);
		IF NOT r.fifo THEN
			PERFORM queue._tenant_index(x.queue_id) FROM queue._queues x WHERE x.queue_name OPERATOR(pg_catalog.=) r.queue_name;
		END IF;
	END LOOP;

	EXECUTE pg_catalog.format('DELETE FROM %s', staging);
	DELETE FROM queue._citus_moves m WHERE m.shard_id OPERATOR(pg_catalog.=) shard_id;
	PERFORM queue._invalidate_shared();
	PERFORM queue._invalidate('queue._queues'::pg_catalog.regclass);
	PERFORM queue._invalidate('queue._consumers'::pg_catalog.regclass);
	PERFORM queue._invalidate('queue._topics'::pg_catalog.regclass);
	RETURN pg_catalog.jsonb_build_object('queues', n_queues, 'messages', n_messages);
END
$$;
REVOKE ALL ON FUNCTION @extschema@._citus_unpack(bigint, boolean, integer) FROM PUBLIC;

/*
 * check (on the target, after out): what the source packed can be made
 * here: names free, owners, grantees and consumers' roles present (by
 * name: Citus creates roles on every node), handlers present.  Reads the
 * packed rows through the coordinator's copy of them (packed).
 */
CREATE FUNCTION @extschema@._citus_check_unpack(packed jsonb)
	RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	bad text;
BEGIN
	SELECT pg_catalog.string_agg(x, ', ') INTO bad FROM pg_catalog.jsonb_array_elements_text(packed OPERATOR(pg_catalog.->) 'roles') x
	WHERE pg_catalog.to_regrole(x) IS NULL;
	IF bad IS NOT NULL THEN
		RAISE EXCEPTION 'roles missing on the target node: %', bad USING ERRCODE = '42704',
			HINT = 'Create them there (Citus propagates CREATE ROLE made on the coordinator).';
	END IF;
	SELECT pg_catalog.string_agg(x, ', ') INTO bad FROM pg_catalog.jsonb_array_elements_text(packed OPERATOR(pg_catalog.->) 'handlers') x
	WHERE pg_catalog.to_regprocedure(x) IS NULL;
	IF bad IS NOT NULL THEN
		RAISE EXCEPTION 'consumer handlers missing on the target node: %', bad USING ERRCODE = '42883';
	END IF;
	SELECT pg_catalog.string_agg(x, ', ') INTO bad FROM pg_catalog.jsonb_array_elements_text(packed OPERATOR(pg_catalog.->) 'queue_names') x
	WHERE EXISTS (SELECT FROM queue._queues r WHERE r.queue_name OPERATOR(pg_catalog.=) x);
	IF bad IS NULL THEN
		SELECT pg_catalog.string_agg(x, ', ') INTO bad FROM pg_catalog.jsonb_array_elements_text(packed OPERATOR(pg_catalog.->) 'topic_names') x
		WHERE EXISTS (SELECT FROM queue._topics t WHERE t.topic_name OPERATOR(pg_catalog.=) x);
	END IF;
	IF bad IS NULL THEN
		SELECT pg_catalog.string_agg(x, ', ') INTO bad FROM pg_catalog.jsonb_array_elements_text(packed OPERATOR(pg_catalog.->) 'consumer_names') x
		WHERE EXISTS (SELECT FROM queue._consumers c WHERE c.consumer_name OPERATOR(pg_catalog.=) x);
	END IF;
	IF bad IS NOT NULL THEN
		RAISE EXCEPTION 'names already taken on the target node: %', bad USING ERRCODE = '42710';
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._citus_check_unpack(jsonb) FROM PUBLIC;

/*
 * One step of a move on this node (run on every node; each acts by its
 * group): recover, announce, out, check, in, done, undo.  Returns what it did (NULL where
 * the node has no part in the step).
 */
CREATE FUNCTION @extschema@._citus_move_step(step text, shard_id bigint, source_group integer,
	target_group integer, arg jsonb)
	RETURNS jsonb LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
	here integer := (SELECT groupid FROM pg_catalog.pg_dist_local_group);
	msg text;
	state text;
	detail text;
BEGIN
	PERFORM queue._citus_move_superuser('queue.citus_move_shard');
	RETURN queue._citus_move_step_here(step, shard_id, source_group, target_group, arg, here);
EXCEPTION WHEN OTHERS THEN
	/* the coordinator reads only the message: give it the SQLSTATE and detail too */
	GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, state = RETURNED_SQLSTATE, detail = PG_EXCEPTION_DETAIL;
	RAISE EXCEPTION '%', state OPERATOR(pg_catalog.||) ': ' OPERATOR(pg_catalog.||) msg
		OPERATOR(pg_catalog.||) coalesce(' (' OPERATOR(pg_catalog.||) NULLIF(detail, '') OPERATOR(pg_catalog.||) ')', '')
		USING ERRCODE = state;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._citus_move_step(text, bigint, integer, integer, jsonb) FROM PUBLIC;

CREATE FUNCTION @extschema@._citus_move_step_here(step text, shard_id bigint, source_group integer,
	target_group integer, arg jsonb, here integer)
	RETURNS jsonb LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_variable
DECLARE
	res jsonb;
BEGIN
	IF step OPERATOR(pg_catalog.=) 'announce' THEN
		IF here OPERATOR(pg_catalog.=) target_group THEN
			INSERT INTO queue._citus_moves (shard_id, direction, peer_group) VALUES (shard_id, 'in', source_group);
			RETURN '{"announced": true}';
		END IF;
	ELSIF step OPERATOR(pg_catalog.=) 'out' THEN
		IF here OPERATOR(pg_catalog.=) source_group THEN
			res := queue._citus_pack(shard_id, target_group);
			/* what the target checks, from the packed rows */
			EXECUTE pg_catalog.format($q$SELECT $1 OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(
				'queue_names', coalesce((SELECT pg_catalog.jsonb_agg(s.placement_key::text) FROM %1$s s WHERE s.kind OPERATOR(pg_catalog.=) 'queue'), '[]'),
				'topic_names', coalesce((SELECT pg_catalog.jsonb_agg(s.placement_key::text) FROM %1$s s WHERE s.kind OPERATOR(pg_catalog.=) 'topic'), '[]'),
				'consumer_names', coalesce((SELECT pg_catalog.jsonb_agg(s.placement_key::text) FROM %1$s s WHERE s.kind OPERATOR(pg_catalog.=) 'consumer'), '[]'),
				'handlers', coalesce((SELECT pg_catalog.jsonb_agg(DISTINCT s.data OPERATOR(pg_catalog.->>) 'handler') FROM %1$s s WHERE s.kind OPERATOR(pg_catalog.=) 'consumer'), '[]'),
				'roles', coalesce((SELECT pg_catalog.jsonb_agg(DISTINCT x) FROM %1$s s,
					LATERAL (SELECT s.data OPERATOR(pg_catalog.->>) 'owner'
							 UNION ALL SELECT pg_catalog.jsonb_array_elements_text(CASE WHEN pg_catalog.jsonb_typeof(s.data OPERATOR(pg_catalog.->) k) OPERATOR(pg_catalog.=) 'array'
								THEN s.data OPERATOR(pg_catalog.->) k ELSE '[]' END)
							 FROM pg_catalog.unnest(ARRAY['send_roles', 'receive_roles', 'manage_roles']) k) v(x)
					WHERE s.kind OPERATOR(pg_catalog.=) ANY (ARRAY['queue', 'topic', 'subscription', 'consumer']) AND x IS NOT NULL), '[]'))$q$,
				queue._citus_staging_shard(shard_id)) INTO res USING res;
			RETURN res;
		END IF;
	ELSIF step OPERATOR(pg_catalog.=) 'check' THEN
		IF here OPERATOR(pg_catalog.=) target_group THEN
			PERFORM queue._citus_check_unpack(arg);
			RETURN '{"checked": true}';
		END IF;
	ELSIF step OPERATOR(pg_catalog.=) 'in' THEN
		IF here OPERATOR(pg_catalog.=) target_group THEN
			RETURN queue._citus_unpack(shard_id, false, source_group);
		END IF;
	ELSIF step OPERATOR(pg_catalog.=) 'done' THEN
		IF here OPERATOR(pg_catalog.=) source_group THEN
			DELETE FROM queue._citus_moves m WHERE m.shard_id OPERATOR(pg_catalog.=) shard_id
				AND m.direction OPERATOR(pg_catalog.=) 'out';
			RETURN '{"done": true}';
		END IF;
	ELSIF step OPERATOR(pg_catalog.=) 'recover' THEN
		/*
		 * A move of this shard that was interrupted (the coordinator's
		 * session ended midway): source_group is the node that holds the
		 * shard now.  There, the queues packed go back ('out': the move
		 * did not happen) or are unpacked ('in': it did); elsewhere the
		 * move is forgotten.
		 */
		IF here OPERATOR(pg_catalog.=) source_group THEN
			IF EXISTS (SELECT FROM queue._citus_moves m WHERE m.shard_id OPERATOR(pg_catalog.=) shard_id
					   AND m.direction OPERATOR(pg_catalog.=) 'out') THEN
				RETURN queue._citus_unpack(shard_id, true, source_group)
					OPERATOR(pg_catalog.||) '{"recovered": "undone"}';
			ELSIF EXISTS (SELECT FROM queue._citus_moves m WHERE m.shard_id OPERATOR(pg_catalog.=) shard_id) THEN
				RETURN queue._citus_unpack(shard_id, false,
					(SELECT m.peer_group FROM queue._citus_moves m WHERE m.shard_id OPERATOR(pg_catalog.=) shard_id))
					OPERATOR(pg_catalog.||) '{"recovered": "finished"}';
			END IF;
		ELSE
			DELETE FROM queue._citus_moves m WHERE m.shard_id OPERATOR(pg_catalog.=) shard_id;
		END IF;
	ELSIF step OPERATOR(pg_catalog.=) 'undo' THEN
		IF here OPERATOR(pg_catalog.=) source_group THEN
			IF EXISTS (SELECT FROM queue._citus_moves m WHERE m.shard_id OPERATOR(pg_catalog.=) shard_id
					   AND m.direction OPERATOR(pg_catalog.=) 'out') THEN
				RETURN queue._citus_unpack(shard_id, true, source_group);
			END IF;
		ELSIF here OPERATOR(pg_catalog.=) target_group THEN
			DELETE FROM queue._citus_moves m WHERE m.shard_id OPERATOR(pg_catalog.=) shard_id
				AND m.direction OPERATOR(pg_catalog.=) 'in';
		END IF;
	ELSE
		RAISE EXCEPTION 'unknown step "%"', step USING ERRCODE = '22023';
	END IF;
	RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._citus_move_step_here(text, bigint, integer, integer, jsonb, integer) FROM PUBLIC;

/*
 * Run a step on every node (each in its own transaction, committed there),
 * on the coordinator: the non-null result, or the first node's error,
 * raised with its node (SQLSTATE 55000 unless the node's message names one).
 */
CREATE FUNCTION @extschema@._citus_run_step(step text, shard_id bigint, source_group integer,
	target_group integer, arg jsonb DEFAULT NULL)
	RETURNS jsonb LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r record;
	res jsonb;
BEGIN
	FOR r IN SELECT n.nodename::text AS node_name, n.nodeport AS node_port, a.success, a.result
			 FROM pg_catalog.run_command_on_all_nodes(pg_catalog.format(
				'SELECT queue._citus_move_step(%L, %s, %s, %s, %L)', step, shard_id, source_group,
				coalesce(target_group::text, 'NULL'), arg)) a
			 JOIN pg_catalog.pg_dist_node n ON n.nodeid OPERATOR(pg_catalog.=) a.nodeid
			 ORDER BY NOT a.success, n.nodeid LOOP
		IF NOT r.success THEN
			/* "ERROR:  <SQLSTATE>: message (detail)", from _citus_move_step */
			RAISE EXCEPTION 'step "%" of moving shard % failed on node %:%: %', step, shard_id, r.node_name, r.node_port,
				pg_catalog.regexp_replace(r.result, '^ERROR:\s+[0-9A-Z]{5}: ', '')
				USING ERRCODE = coalesce((pg_catalog.regexp_match(r.result, '^ERROR:\s+([0-9A-Z]{5}): '))[1], '55000');
		END IF;
		IF r.result IS NOT NULL AND r.result OPERATOR(pg_catalog.<>) '' THEN
			res := r.result::jsonb;
		END IF;
	END LOOP;
	RETURN res;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._citus_run_step(text, bigint, integer, integer, jsonb) FROM PUBLIC;

/*
 * queue.citus_move_shard(shard_id, target_node, target_port): move the
 * queues of a shard of queue_citus.placements (every queue, topic and
 * consumer whose name it places, with their messages, leases, FIFO groups
 * and deduplication windows) and the shard itself to another node.  On the
 * coordinator, by a superuser, as CALL outside a transaction block: each
 * step commits before the next.  See the steps at the top of this section.
 *
 * A procedure without SET: transaction control forbids one, so the search
 * path is pinned by set_config in each transaction and every name is
 * qualified.
 */
CREATE PROCEDURE @extschema@.citus_move_shard(shard_id bigint, target_node text, target_port integer)
	LANGUAGE plpgsql
AS $$
DECLARE
	src record;
	tgt record;
	packed jsonb;
	unpacked jsonb;
	recovered jsonb;
	t0 timestamptz := pg_catalog.clock_timestamp();
	msg text;
	state text;
BEGIN
	PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
	IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user) THEN
		RAISE EXCEPTION 'queue.citus_move_shard must be run by a superuser' USING ERRCODE = '42501';
	END IF;
	IF shard_id IS NULL THEN
		RAISE EXCEPTION 'argument "shard_id" must not be null' USING ERRCODE = '22004';
	ELSIF target_node IS NULL THEN
		RAISE EXCEPTION 'argument "target_node" must not be null' USING ERRCODE = '22004';
	ELSIF target_port IS NULL THEN
		RAISE EXCEPTION 'argument "target_port" must not be null' USING ERRCODE = '22004';
	END IF;
	PERFORM queue._citus_check_coordinator('queue.citus_move_shard');
	SELECT n.groupid, n.nodename::text AS nodename, n.nodeport INTO src
	FROM pg_catalog.pg_dist_shard s
	JOIN pg_catalog.pg_dist_placement p ON p.shardid OPERATOR(pg_catalog.=) s.shardid
	JOIN pg_catalog.pg_dist_node n ON n.groupid OPERATOR(pg_catalog.=) p.groupid
	 AND n.noderole OPERATOR(pg_catalog.=) 'primary'
	WHERE s.shardid OPERATOR(pg_catalog.=) shard_id
	  AND s.logicalrelid OPERATOR(pg_catalog.=) 'queue_citus.placements'::pg_catalog.regclass;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'argument "shard_id" (%) is not a shard of queue_citus.placements', shard_id
			USING ERRCODE = '22023',
			HINT = 'queue.citus_placement(queue_name) gives the shard of a queue.';
	END IF;
	SELECT n.groupid, n.nodename::text AS nodename, n.nodeport, n.shouldhaveshards INTO tgt
	FROM pg_catalog.pg_dist_node n
	WHERE n.nodename OPERATOR(pg_catalog.=) target_node AND n.nodeport OPERATOR(pg_catalog.=) target_port
	  AND n.noderole OPERATOR(pg_catalog.=) 'primary' AND n.isactive;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'arguments "target_node" and "target_port" (%:%) name no active primary node of the cluster',
			target_node, target_port USING ERRCODE = '22023';
	END IF;

	/* queue_citus.moving: where the queues travel, colocated with the anchor */
	IF pg_catalog.to_regclass('queue_citus.moving') IS NULL THEN
		CREATE TABLE queue_citus.moving (placement_key queue.placement_key, kind text, queue_id bigint, data jsonb);
		REVOKE ALL ON queue_citus.moving FROM PUBLIC;
		COMMENT ON TABLE queue_citus.moving IS
			'queues on their way between nodes (queue.citus_move_shard): empty but during a move';
		PERFORM pg_catalog.create_distributed_table('queue_citus.moving', 'placement_key',
			colocate_with => 'queue_citus.placements');
	END IF;
	IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_class c JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) c.relowner
			WHERE c.oid OPERATOR(pg_catalog.=) 'queue_citus.moving'::pg_catalog.regclass) THEN
		RAISE EXCEPTION 'table "queue_citus.moving" is not owned by a superuser' USING ERRCODE = '42501';
	END IF;
	COMMIT;
	PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);

	/*
	 * One move of a shard at a time: a session lock, held across the
	 * commits below (an error leaves it to the session, which may call
	 * again; another session waits for its end).
	 */
	IF NOT pg_catalog.pg_try_advisory_lock(pg_catalog.hashtext('queue.citus_move_shard'),
										   (shard_id OPERATOR(pg_catalog.%) 2147483647)::integer) THEN
		RAISE EXCEPTION 'another session is moving shard %', shard_id USING ERRCODE = '55006';
	END IF;

	/* an earlier move of this shard that was interrupted is finished or undone first */
	recovered := queue._citus_run_step('recover', shard_id, src.groupid, NULL);
	IF recovered IS NOT NULL THEN
		RAISE NOTICE 'an interrupted move of shard % was % on %:% (% queues, % messages)', shard_id,
			recovered OPERATOR(pg_catalog.->>) 'recovered', src.nodename, src.nodeport,
			recovered OPERATOR(pg_catalog.->>) 'queues', recovered OPERATOR(pg_catalog.->>) 'messages';
	END IF;
	IF tgt.groupid OPERATOR(pg_catalog.=) src.groupid THEN
		IF recovered IS NOT NULL THEN
			PERFORM pg_catalog.pg_advisory_unlock(pg_catalog.hashtext('queue.citus_move_shard'),
												  (shard_id OPERATOR(pg_catalog.%) 2147483647)::integer);
			RETURN;
		END IF;
		RAISE EXCEPTION 'shard % is on %:% already', shard_id, target_node, target_port USING ERRCODE = '22023';
	END IF;
	IF NOT tgt.shouldhaveshards THEN
		RAISE EXCEPTION 'node %:% is marked to hold no shards', target_node, target_port USING ERRCODE = '55000',
			HINT = 'SELECT citus_set_node_property(node_name, node_port, ''shouldhaveshards'', true) marks it to hold them.';
	END IF;

	PERFORM queue._citus_run_step('announce', shard_id, src.groupid, tgt.groupid);
	BEGIN
		packed := queue._citus_run_step('out', shard_id, src.groupid, tgt.groupid);
		PERFORM queue._citus_run_step('check', shard_id, src.groupid, tgt.groupid, packed);
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, state = RETURNED_SQLSTATE;
		PERFORM queue._citus_run_step('undo', shard_id, src.groupid, tgt.groupid);
		RAISE EXCEPTION 'moving shard % failed; its queues stay on %:%', shard_id, src.nodename, src.nodeport
			USING ERRCODE = state, DETAIL = msg;
	END;
	COMMIT;
	PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);

	BEGIN
		PERFORM pg_catalog.citus_move_shard_placement(shard_id, src.nodename, src.nodeport,
			tgt.nodename, tgt.nodeport, shard_transfer_mode => 'block_writes');
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, state = RETURNED_SQLSTATE;
		PERFORM queue._citus_run_step('undo', shard_id, src.groupid, tgt.groupid);
		RAISE EXCEPTION 'moving shard % failed; its queues stay on %:%', shard_id, src.nodename, src.nodeport
			USING ERRCODE = state, DETAIL = msg;
	END;
	COMMIT;
	PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);

	BEGIN
		unpacked := queue._citus_run_step('in', shard_id, src.groupid, tgt.groupid);
	EXCEPTION WHEN OTHERS THEN
		/* back where they were: the shard (with the packed rows), then the queues */
		GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, state = RETURNED_SQLSTATE;
		PERFORM pg_catalog.citus_move_shard_placement(shard_id, tgt.nodename, tgt.nodeport,
			src.nodename, src.nodeport, shard_transfer_mode => 'block_writes');
		PERFORM queue._citus_run_step('undo', shard_id, src.groupid, tgt.groupid);
		RAISE EXCEPTION 'moving shard % failed; its queues stay on %:%', shard_id, src.nodename, src.nodeport
			USING ERRCODE = state, DETAIL = msg;
	END;
	PERFORM queue._citus_run_step('done', shard_id, src.groupid, tgt.groupid);
	PERFORM pg_catalog.pg_advisory_unlock(pg_catalog.hashtext('queue.citus_move_shard'),
										  (shard_id OPERATOR(pg_catalog.%) 2147483647)::integer);
	RAISE NOTICE 'moved shard % with % queues (% messages), % topics and % consumers from %:% to %:% in % ms',
		shard_id, packed OPERATOR(pg_catalog.->>) 'queues', packed OPERATOR(pg_catalog.->>) 'messages',
		packed OPERATOR(pg_catalog.->>) 'topics', packed OPERATOR(pg_catalog.->>) 'consumers',
		src.nodename, src.nodeport, tgt.nodename, tgt.nodeport,
		pg_catalog.round(EXTRACT(epoch FROM pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) t0) OPERATOR(pg_catalog.*) 1000);
END
$$;
REVOKE ALL ON PROCEDURE @extschema@.citus_move_shard(bigint, text, integer) FROM PUBLIC;
COMMENT ON PROCEDURE @extschema@.citus_move_shard(bigint, text, integer) IS
	'move a shard of queue_citus.placements with its queues, topics and consumers to another node of a Citus cluster (on the coordinator, by a superuser)';

/*
 * The SQS endpoint across nodes (docs/citus.md): each node's endpoint URL,
 * so that a request for a queue of another node is forwarded there
 * (src/sqs/forward.c).  queue_citus.sqs_endpoints is a Citus reference
 * table (on every node, nodes added later too), written by
 * queue.citus_set_sqs_endpoint on the coordinator and read by the
 * endpoint's workers as their superuser.
 */
CREATE FUNCTION @extschema@.citus_set_sqs_endpoint(node_name text, node_port integer, endpoint text)
	RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	grp integer;
BEGIN
	IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user) THEN
		RAISE EXCEPTION 'queue.citus_set_sqs_endpoint must be run by a superuser' USING ERRCODE = '42501';
	END IF;
	IF node_name IS NULL THEN
		RAISE EXCEPTION 'argument "node_name" must not be null' USING ERRCODE = '22004';
	ELSIF node_port IS NULL THEN
		RAISE EXCEPTION 'argument "node_port" must not be null' USING ERRCODE = '22004';
	END IF;
	PERFORM queue._citus_check_coordinator('queue.citus_set_sqs_endpoint');
	IF endpoint IS NOT NULL AND endpoint OPERATOR(pg_catalog.!~) '^https?://[A-Za-z0-9.:\[\]_-]+(/[A-Za-z0-9._~/-]*)?$' THEN
		RAISE EXCEPTION 'argument "endpoint" must be an http:// or https:// URL of the node''s SQS endpoint'
			USING ERRCODE = '22023', DETAIL = pg_catalog.format('It is %L.', endpoint);
	END IF;
	SELECT n.groupid INTO grp FROM pg_catalog.pg_dist_node n
	WHERE n.nodename OPERATOR(pg_catalog.=) node_name AND n.nodeport OPERATOR(pg_catalog.=) node_port
	  AND n.noderole OPERATOR(pg_catalog.=) 'primary';
	IF NOT FOUND THEN
		RAISE EXCEPTION 'arguments "node_name" and "node_port" (%:%) name no primary node of the cluster',
			node_name, node_port USING ERRCODE = '22023';
	END IF;
	IF pg_catalog.to_regclass('queue_citus.sqs_endpoints') IS NULL THEN
		CREATE TABLE queue_citus.sqs_endpoints (node_group integer PRIMARY KEY, endpoint text NOT NULL);
		REVOKE ALL ON queue_citus.sqs_endpoints FROM PUBLIC;
		COMMENT ON TABLE queue_citus.sqs_endpoints IS
			'the SQS endpoint of each node (queue.citus_set_sqs_endpoint): requests for a queue of another node go there';
		PERFORM pg_catalog.create_reference_table('queue_citus.sqs_endpoints');
	END IF;
	IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_class c JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) c.relowner
			WHERE c.oid OPERATOR(pg_catalog.=) 'queue_citus.sqs_endpoints'::pg_catalog.regclass) THEN
		RAISE EXCEPTION 'table "queue_citus.sqs_endpoints" is not owned by a superuser' USING ERRCODE = '42501';
	END IF;
	IF endpoint IS NULL THEN
		DELETE FROM queue_citus.sqs_endpoints e WHERE e.node_group OPERATOR(pg_catalog.=) grp;
	ELSE
		INSERT INTO queue_citus.sqs_endpoints AS e (node_group, endpoint) VALUES (grp, endpoint)
		ON CONFLICT (node_group) DO UPDATE SET endpoint = EXCLUDED.endpoint;
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.citus_set_sqs_endpoint(text, integer, text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.citus_set_sqs_endpoint(text, integer, text) IS
	'name the SQS endpoint URL of a node of a Citus cluster (NULL: none), so that any node''s endpoint forwards to it';
