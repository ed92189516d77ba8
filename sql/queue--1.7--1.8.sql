/* queue--1.7--1.8.sql: queues spread over a Citus cluster (issue 37) */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.8'" to load this file. \quit

/*
 * Past one machine (docs/citus.md).  Each queue stays in the extension's
 * local tables of one node; Citus routes a call to that node by the queue's
 * placement key, as it routes a distributed function call by its
 * distribution argument: queue.citus_setup() (below) makes an empty anchor
 * table, queue_citus.placements, distributed by a column of type
 * queue.placement_key, and distributes the API functions colocated with it
 * by their queue_name (topic_name, source_queue) argument.
 *
 * queue.placement_key is text whose hash (the one Citus places by) is the
 * hash of its tenant key: the part of the name before its first '.', or the
 * whole name when it has none.  So 'acme.orders', 'acme.orders_dlq' and the
 * topic 'acme.events' share a node, while 'orders' is placed by its whole
 * name.  A text argument reaches the type by the cast below (Citus coerces
 * a distribution argument to the anchor's column type).  Equal keys have
 * equal tenant keys, so equality and hash agree as a hash opclass needs.
 *
 * Nothing here needs Citus: without it the type and the functions are
 * unused, and queue.citus_setup() says Citus is missing.
 */
CREATE TYPE @extschema@.placement_key;

CREATE FUNCTION @extschema@._placement_key_in(cstring)
	RETURNS @extschema@.placement_key LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE
	AS 'textin';
CREATE FUNCTION @extschema@._placement_key_out(@extschema@.placement_key)
	RETURNS cstring LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE
	AS 'textout';
CREATE FUNCTION @extschema@._placement_key_recv(internal)
	RETURNS @extschema@.placement_key LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE
	AS 'textrecv';
CREATE FUNCTION @extschema@._placement_key_send(@extschema@.placement_key)
	RETURNS bytea LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE
	AS 'textsend';

CREATE TYPE @extschema@.placement_key (
	INPUT = @extschema@._placement_key_in,
	OUTPUT = @extschema@._placement_key_out,
	RECEIVE = @extschema@._placement_key_recv,
	SEND = @extschema@._placement_key_send,
	LIKE = pg_catalog.text
);
COMMENT ON FUNCTION @extschema@._placement_key_in(cstring) IS 'input of queue.placement_key (as text)';
COMMENT ON FUNCTION @extschema@._placement_key_out(@extschema@.placement_key) IS 'output of queue.placement_key (as text)';
COMMENT ON FUNCTION @extschema@._placement_key_recv(internal) IS 'binary input of queue.placement_key (as text)';
COMMENT ON FUNCTION @extschema@._placement_key_send(@extschema@.placement_key) IS 'binary output of queue.placement_key (as text)';
COMMENT ON TYPE @extschema@.placement_key IS
	'a queue or topic name as Citus places it: hashed by its tenant key (the part before the first ".")';

CREATE FUNCTION @extschema@.placement_key_eq(@extschema@.placement_key, @extschema@.placement_key)
	RETURNS boolean LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'queue_placement_key_eq';
COMMENT ON FUNCTION @extschema@.placement_key_eq(@extschema@.placement_key, @extschema@.placement_key) IS
	'equality of placement keys (byte-wise, as the names are)';
CREATE FUNCTION @extschema@.placement_key_hash(@extschema@.placement_key)
	RETURNS integer LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'queue_placement_key_hash';
COMMENT ON FUNCTION @extschema@.placement_key_hash(@extschema@.placement_key) IS
	'the hash Citus places a queue by: that of its tenant key (the name up to its first ".")';
CREATE FUNCTION @extschema@.placement_of(queue_name text)
	RETURNS text LANGUAGE C IMMUTABLE PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'queue_placement_of';
COMMENT ON FUNCTION @extschema@.placement_of(text) IS
	'the tenant key a queue or topic is placed by on a Citus cluster: its name up to the first "."';

CREATE OPERATOR @extschema@.= (
	LEFTARG = @extschema@.placement_key,
	RIGHTARG = @extschema@.placement_key,
	FUNCTION = @extschema@.placement_key_eq,
	COMMUTATOR = OPERATOR(@extschema@.=),
	HASHES
);
CREATE OPERATOR CLASS @extschema@.placement_key_ops
	DEFAULT FOR TYPE @extschema@.placement_key USING hash AS
	OPERATOR 1 @extschema@.= (@extschema@.placement_key, @extschema@.placement_key),
	FUNCTION 1 @extschema@.placement_key_hash(@extschema@.placement_key);
CREATE CAST (text AS @extschema@.placement_key) WITHOUT FUNCTION AS ASSIGNMENT;
/* ... and reads as text where queue's operators are not on the search path */
CREATE CAST (@extschema@.placement_key AS text) WITHOUT FUNCTION AS IMPLICIT;

/* Citus wants a btree opclass of a distribution column too: byte order. */
CREATE FUNCTION @extschema@.placement_key_cmp(@extschema@.placement_key, @extschema@.placement_key)
	RETURNS integer LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE
	AS 'MODULE_PATHNAME', 'queue_placement_key_cmp';
COMMENT ON FUNCTION @extschema@.placement_key_cmp(@extschema@.placement_key, @extschema@.placement_key) IS
	'byte order of placement keys (btree support)';
CREATE FUNCTION @extschema@.placement_key_lt(@extschema@.placement_key, @extschema@.placement_key)
	RETURNS boolean LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
	RETURN @extschema@.placement_key_cmp($1, $2) OPERATOR(pg_catalog.<) 0;
CREATE FUNCTION @extschema@.placement_key_le(@extschema@.placement_key, @extschema@.placement_key)
	RETURNS boolean LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
	RETURN @extschema@.placement_key_cmp($1, $2) OPERATOR(pg_catalog.<=) 0;
CREATE FUNCTION @extschema@.placement_key_ge(@extschema@.placement_key, @extschema@.placement_key)
	RETURNS boolean LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
	RETURN @extschema@.placement_key_cmp($1, $2) OPERATOR(pg_catalog.>=) 0;
CREATE FUNCTION @extschema@.placement_key_gt(@extschema@.placement_key, @extschema@.placement_key)
	RETURNS boolean LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
	RETURN @extschema@.placement_key_cmp($1, $2) OPERATOR(pg_catalog.>) 0;
COMMENT ON FUNCTION @extschema@.placement_key_lt(@extschema@.placement_key, @extschema@.placement_key) IS 'placement key < (byte order)';
COMMENT ON FUNCTION @extschema@.placement_key_le(@extschema@.placement_key, @extschema@.placement_key) IS 'placement key <= (byte order)';
COMMENT ON FUNCTION @extschema@.placement_key_ge(@extschema@.placement_key, @extschema@.placement_key) IS 'placement key >= (byte order)';
COMMENT ON FUNCTION @extschema@.placement_key_gt(@extschema@.placement_key, @extschema@.placement_key) IS 'placement key > (byte order)';
CREATE OPERATOR @extschema@.< (LEFTARG = @extschema@.placement_key, RIGHTARG = @extschema@.placement_key,
	FUNCTION = @extschema@.placement_key_lt);
CREATE OPERATOR @extschema@.<= (LEFTARG = @extschema@.placement_key, RIGHTARG = @extschema@.placement_key,
	FUNCTION = @extschema@.placement_key_le);
CREATE OPERATOR @extschema@.>= (LEFTARG = @extschema@.placement_key, RIGHTARG = @extschema@.placement_key,
	FUNCTION = @extschema@.placement_key_ge);
CREATE OPERATOR @extschema@.> (LEFTARG = @extschema@.placement_key, RIGHTARG = @extschema@.placement_key,
	FUNCTION = @extschema@.placement_key_gt);
CREATE OPERATOR CLASS @extschema@.placement_key_btree_ops
	DEFAULT FOR TYPE @extschema@.placement_key USING btree AS
	OPERATOR 1 @extschema@.<, OPERATOR 2 @extschema@.<=, OPERATOR 3 @extschema@.=,
	OPERATOR 4 @extschema@.>=, OPERATOR 5 @extschema@.>,
	FUNCTION 1 @extschema@.placement_key_cmp(@extschema@.placement_key, @extschema@.placement_key);

/*
 * The comparison and hash functions are pure and open to every role with
 * USAGE on the schema (an application's queries compare its tenant
 * column); the I/O functions are not (a type's I/O is called without a
 * privilege check).
 */
REVOKE ALL ON FUNCTION @extschema@._placement_key_in(cstring),
	@extschema@._placement_key_out(@extschema@.placement_key),
	@extschema@._placement_key_recv(internal),
	@extschema@._placement_key_send(@extschema@.placement_key) FROM PUBLIC;

/*
 * queue.citus_setup(): the one call that sets a Citus cluster up, on its
 * coordinator, after CREATE EXTENSION citus and queue on every node and the
 * workers added (Citus's own set-up).  Idempotent: a second call changes
 * nothing and says so.  Returns how many functions it distributed now.
 *
 * Each API function whose placement argument is a queue's or topic's name
 * (create_consumer: its queue's), or a consumer's (drop_consumer,
 * pause_consumer, resume_consumer: a consumer's name is placed as a queue's
 * and must share its queue's node), is distributed colocated with the
 * anchor, with force_delegation, so a
 * call is run by the node that holds the name's shard, inside the caller's
 * transaction.  A call Citus does not delegate runs where it was made and
 * is refused there by the wrong-node guard (src/storage/citus.c) unless
 * this is the queue's node.
 */
CREATE FUNCTION @extschema@.citus_setup()
	RETURNS integer LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	n integer := 0;
	f record;
	owner_name name;
	owner_super boolean;
BEGIN
	IF NOT (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) current_user) THEN
		RAISE EXCEPTION 'queue.citus_setup() must be run by a superuser'
			USING ERRCODE = '42501';
	END IF;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
		RAISE EXCEPTION 'extension "citus" is not installed in this database'
			USING ERRCODE = '55000',
				  HINT = 'Install Citus and run CREATE EXTENSION citus on every node, add the workers, then call queue.citus_setup() on the coordinator.';
	END IF;
	IF (SELECT groupid FROM pg_catalog.pg_dist_local_group) OPERATOR(pg_catalog.<>) 0 THEN
		RAISE EXCEPTION 'queue.citus_setup() must be run on the coordinator'
			USING ERRCODE = '55000';
	END IF;

	CREATE SCHEMA IF NOT EXISTS queue_citus;
	/* a schema or anchor someone else made first would be trusted below */
	SELECT r.rolname, r.rolsuper INTO owner_name, owner_super
	FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) n.nspowner
	WHERE n.nspname OPERATOR(pg_catalog.=) 'queue_citus';
	IF NOT owner_super THEN
		RAISE EXCEPTION 'schema "queue_citus" is owned by role "%", who is not a superuser', owner_name
			USING ERRCODE = '42501', HINT = 'Drop it (it holds only the anchor of queue.citus_setup) and call queue.citus_setup() again.';
	END IF;
	REVOKE ALL ON SCHEMA queue_citus FROM PUBLIC;
	COMMENT ON SCHEMA queue_citus IS 'the anchor queue''s placement on a Citus cluster (queue.citus_setup)';
	IF pg_catalog.to_regclass('queue_citus.placements') IS NULL THEN
		CREATE TABLE queue_citus.placements (placement_key queue.placement_key);
		COMMENT ON TABLE queue_citus.placements IS
			'always empty: its shards are where queues live; API functions are colocated with it';
	END IF;
	SELECT r.rolname, r.rolsuper INTO owner_name, owner_super
	FROM pg_catalog.pg_class c JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) c.relowner
	WHERE c.oid OPERATOR(pg_catalog.=) 'queue_citus.placements'::pg_catalog.regclass;
	IF NOT owner_super THEN
		RAISE EXCEPTION 'table "queue_citus.placements" is owned by role "%", who is not a superuser', owner_name
			USING ERRCODE = '42501';
	END IF;
	REVOKE ALL ON queue_citus.placements FROM PUBLIC;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_dist_partition
				   WHERE logicalrelid OPERATOR(pg_catalog.=) 'queue_citus.placements'::pg_catalog.regclass) THEN
		PERFORM pg_catalog.create_distributed_table('queue_citus.placements', 'placement_key',
													colocate_with => 'none');
		n := n + 1;
	END IF;

	FOR f IN
		SELECT p.oid::pg_catalog.regprocedure AS fn,
			   CASE WHEN p.proname OPERATOR(pg_catalog.=) 'create_consumer' THEN 'queue_name'
					ELSE (p.proargnames)[1] END AS arg
		FROM pg_catalog.pg_proc p
		WHERE p.pronamespace OPERATOR(pg_catalog.=) 'queue'::pg_catalog.regnamespace
		  AND p.proname !~ '^(_|citus_|placement_)'
		  AND ((p.proargnames)[1] IN ('queue_name', 'topic_name', 'source_queue', 'consumer_name'))
		  AND NOT EXISTS (SELECT FROM pg_catalog.pg_dist_object d
						  WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
							AND d.objid OPERATOR(pg_catalog.=) p.oid
							AND d.colocationid IS NOT NULL)
		ORDER BY 1::text
	LOOP
		PERFORM pg_catalog.create_distributed_function(f.fn, f.arg,
			colocate_with => 'queue_citus.placements', force_delegation => true);
		n := n + 1;
	END LOOP;
	IF n OPERATOR(pg_catalog.=) 0 THEN
		RAISE NOTICE 'the cluster is already set up for queues';
	END IF;
	RETURN n;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.citus_setup() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.citus_setup() IS
	'set a Citus cluster up for queues (on its coordinator; idempotent): returns how many objects it distributed';

/*
 * Where a queue (or topic) lives on a Citus cluster: its placement key, the
 * anchor's shard for it and the node holding that shard.  Empty without
 * Citus or before queue.citus_setup().
 */
CREATE FUNCTION @extschema@.citus_placement(queue_name text)
	RETURNS TABLE (placement_key text, shard_id bigint, node_name text, node_port integer, is_local boolean)
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF queue_name IS NULL THEN
		RAISE EXCEPTION 'argument "queue_name" must not be null' USING ERRCODE = '22004';
	END IF;
	PERFORM queue.placement_of(queue_name);	-- the name's checks (42602, 42622)
	IF pg_catalog.to_regclass('queue_citus.placements') IS NULL
	   OR NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
		RETURN;
	END IF;
	RETURN QUERY EXECUTE
		'SELECT queue.placement_of($1), s.shardid, n.nodename::text, n.nodeport,
				n.groupid OPERATOR(pg_catalog.=) (SELECT groupid FROM pg_catalog.pg_dist_local_group)
		 FROM pg_catalog.pg_dist_placement s
		 JOIN pg_catalog.pg_dist_node n ON n.groupid OPERATOR(pg_catalog.=) s.groupid
		 WHERE n.noderole OPERATOR(pg_catalog.=) ''primary''
		   AND s.shardid OPERATOR(pg_catalog.=) pg_catalog.get_shard_id_for_distribution_column(
				''queue_citus.placements''::pg_catalog.regclass, $1::queue.placement_key)'
		USING queue_name;
END
$$;
COMMENT ON FUNCTION @extschema@.citus_placement(text) IS
	'where a queue or topic lives on a Citus cluster: placement key, shard, node (empty without Citus)';

CREATE FUNCTION @extschema@._citus_manages(rel regclass)
	RETURNS boolean LANGUAGE C
	AS 'MODULE_PATHNAME', 'queue_citus_manages_sql';
REVOKE ALL ON FUNCTION @extschema@._citus_manages(regclass) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._citus_manages(regclass) IS
	'whether Citus manages a table (a distributed table''s shell or a shard), so sends write it by statement';

/*
 * Cluster-wide views, read on the coordinator: each node's rows of
 * queue.queues, queue.stats and queue.consumers with the node's name and
 * port, gathered by Citus (run_command_on_all_nodes) as the calling role,
 * so every node shows it what its privileges allow.  Empty without Citus
 * or before queue.citus_setup(); a node that cannot be read is an error
 * naming it.
 */
CREATE FUNCTION @extschema@.citus_rows(view_name text)
	RETURNS TABLE (node_name text, node_port integer, row_data jsonb)
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r record;
BEGIN
	IF view_name NOT IN ('queues', 'stats', 'consumers') THEN
		RAISE EXCEPTION 'argument "view_name" must be queues, stats or consumers' USING ERRCODE = '22023';
	END IF;
	IF pg_catalog.to_regclass('queue_citus.placements') IS NULL
	   OR NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
		RETURN;
	END IF;
	FOR r IN EXECUTE
		'SELECT n.nodename::text AS node_name, n.nodeport AS node_port, a.success, a.result
		 FROM pg_catalog.run_command_on_all_nodes($1) a
		 JOIN pg_catalog.pg_dist_node n ON n.nodeid OPERATOR(pg_catalog.=) a.nodeid
		 ORDER BY n.nodeid'
		USING pg_catalog.format('SELECT coalesce(pg_catalog.json_agg(v), ''[]''::pg_catalog.json) FROM queue.%I v', view_name)
	LOOP
		IF NOT r.success THEN
			RAISE EXCEPTION 'could not read queue.% on node %:%: %', view_name, r.node_name, r.node_port, r.result
				USING ERRCODE = '08006';
		END IF;
		RETURN QUERY SELECT r.node_name, r.node_port, e FROM pg_catalog.jsonb_array_elements(r.result::jsonb) e;
	END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@.citus_rows(text) IS
	'every node''s rows of queue.<view_name> (queues, stats, consumers) as JSON, gathered on a Citus coordinator';


CREATE FUNCTION @extschema@.citus_queues()
	RETURNS TABLE (node_name text, node_port integer, queues @extschema@.queues)
	LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp
AS $$
	SELECT g.node_name, g.node_port, pg_catalog.jsonb_populate_record(NULL::queue.queues, g.row_data)
	FROM queue.citus_rows('queues') g
$$;
COMMENT ON FUNCTION @extschema@.citus_queues() IS
	'queue.queues of every node of a Citus cluster, with the node (read on the coordinator; empty without Citus)';

CREATE FUNCTION @extschema@.citus_stats()
	RETURNS TABLE (node_name text, node_port integer, stats @extschema@.stats)
	LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp
AS $$
	SELECT g.node_name, g.node_port, pg_catalog.jsonb_populate_record(NULL::queue.stats, g.row_data)
	FROM queue.citus_rows('stats') g
$$;
COMMENT ON FUNCTION @extschema@.citus_stats() IS
	'queue.stats of every node of a Citus cluster, with the node (read on the coordinator; empty without Citus)';

CREATE FUNCTION @extschema@.citus_consumers()
	RETURNS TABLE (node_name text, node_port integer, consumers @extschema@.consumers)
	LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp
AS $$
	SELECT g.node_name, g.node_port, pg_catalog.jsonb_populate_record(NULL::queue.consumers, g.row_data)
	FROM queue.citus_rows('consumers') g
$$;
COMMENT ON FUNCTION @extschema@.citus_consumers() IS
	'queue.consumers of every node of a Citus cluster, with the node (read on the coordinator; empty without Citus)';
