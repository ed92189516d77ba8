/* queue--1.0--1.1.sql: a queue is a system of record */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.1'" to load this file. \quit

/*
 * What 1.1 changes, and why (DESIGN.md "Backup, restore and upgrades",
 * "Access"):
 *  - a queue's owner and grants become PostgreSQL's own: the owner and ACL
 *    of its message table queue_data.q<id> (send = INSERT, receive =
 *    UPDATE, manage = TRUNCATE).  Nobody else has USAGE on queue_data, so
 *    the table privileges open nothing directly; pg_dump keeps them by role
 *    name, DROP ROLE is refused while they exist, and DROP OWNED /
 *    REASSIGN OWNED handle queues as the tables they are.
 *  - tables are found by name (queue_data.q<id>), never by a stored OID,
 *    which a restore into another cluster would not keep.
 *  - the id sequences are dumped with the registry; the receipt key is not
 *    (a restored database makes a key of its own).
 *  - the admin views show a role only the queues it holds a privilege on.
 *
 * CREATE EXTENSION of 1.1 runs queue--1.0.sql and then this file, so a
 * fresh install and an upgraded one have the same catalog by construction.
 */

/*
 * The API's schema must be the installer's: a schema "queue" that another
 * role created beforehand would let that role drop or replace our objects.
 * (A dump creates the schema as its superuser owner before CREATE
 * EXTENSION: that is fine.)
 */
DO $$
DECLARE
	owner_name text;
BEGIN
	SELECT r.rolname INTO owner_name
	FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_roles r ON r.oid = n.nspowner
	WHERE n.nspname = 'queue' AND NOT r.rolsuper;
	IF FOUND THEN
		RAISE EXCEPTION 'schema "queue" is owned by role "%", who is not a superuser', owner_name
			USING ERRCODE = '42P06',
			HINT = 'Drop that schema, or give it to a superuser, before CREATE EXTENSION queue.';
	END IF;
END
$$;

/* ---------------------------------------------------------------------
 * Dumps: ids continue above the restored ones; the receipt key stays out.
 * --------------------------------------------------------------------- */
SELECT pg_catalog.pg_extension_config_dump('queue_data.message_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@._queues_queue_id_seq', '');
/* Leaving and rejoining the extension takes _secret off its dumped tables. */
ALTER EXTENSION queue DROP TABLE @extschema@._secret;
ALTER EXTENSION queue ADD TABLE @extschema@._secret;
COMMENT ON TABLE @extschema@._secret IS 'per-database key that signs receipts (never dumped: a restore makes a new one)';

/* ---------------------------------------------------------------------
 * C helpers of 1.1
 * --------------------------------------------------------------------- */
CREATE FUNCTION @extschema@._holds(queue_id bigint, role oid, privilege text)
	RETURNS boolean LANGUAGE C STRICT STABLE AS 'MODULE_PATHNAME', 'queue_holds_sql';
REVOKE ALL ON FUNCTION @extschema@._holds(bigint, oid, text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._holds(bigint, oid, text) IS 'whether a role holds send, receive or manage on a queue (owner, superuser, or the message table''s ACL)';

/* Callable by every role: it answers only for the role that calls. */
CREATE FUNCTION @extschema@._may_see(queue_id bigint)
	RETURNS boolean LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'queue_may_see_sql';
COMMENT ON FUNCTION @extschema@._may_see(bigint) IS 'whether the current role holds any privilege on a queue (the admin views'' filter)';

CREATE FUNCTION @extschema@._depth_checked(queue_id bigint, retention interval,
	OUT visible bigint, OUT in_flight bigint, OUT delayed bigint,
	OUT oldest_sent_at timestamptz, OUT oldest_visible_age interval)
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_depth_checked_sql';
COMMENT ON FUNCTION @extschema@._depth_checked(bigint, interval) IS 'queue._depth for a role that holds a privilege on the queue (42501 otherwise)';

/* ---------------------------------------------------------------------
 * Owners and grants move from the registry to the message tables.
 * --------------------------------------------------------------------- */
DO $$
DECLARE
	r record;
	g record;
	tbl text;
	who text;
BEGIN
	FOR r IN SELECT q.queue_id, q.owner, q.send_roles, q.receive_roles, q.manage_roles
			 FROM @extschema@._queues q ORDER BY q.queue_id LOOP
		tbl := pg_catalog.format('queue_data.q%s', r.queue_id);
		SELECT rolname INTO who FROM pg_catalog.pg_roles WHERE oid = r.owner;
		IF FOUND THEN
			EXECUTE pg_catalog.format('ALTER TABLE %s OWNER TO %I', tbl, who);
		ELSE
			RAISE WARNING 'queue id % belonged to a dropped role (oid %): it now belongs to %',
				r.queue_id, r.owner, current_user;
		END IF;
		FOR g IN SELECT v.mode, u.role
				 FROM (VALUES ('INSERT', r.send_roles), ('UPDATE', r.receive_roles),
							  ('TRUNCATE', r.manage_roles)) v(mode, roles),
					  pg_catalog.unnest(v.roles) u(role) LOOP
			IF g.role = 0 THEN
				EXECUTE pg_catalog.format('GRANT %s ON TABLE %s TO PUBLIC', g.mode, tbl);
				CONTINUE;
			END IF;
			SELECT rolname INTO who FROM pg_catalog.pg_roles WHERE oid = g.role;
			IF FOUND THEN
				EXECUTE pg_catalog.format('GRANT %s ON TABLE %s TO %I', g.mode, tbl, who);
			ELSE
				RAISE WARNING 'queue id %: a grant to a dropped role (oid %) is gone', r.queue_id, g.role;
			END IF;
		END LOOP;
	END LOOP;
END
$$;

DROP VIEW @extschema@.stats;
DROP VIEW @extschema@.queues;
ALTER TABLE @extschema@._queues
	DROP COLUMN owner,
	DROP COLUMN send_roles,
	DROP COLUMN receive_roles,
	DROP COLUMN manage_roles,
	DROP COLUMN msg_relid;
/*
 * The registry's dead-letter reference is kept by create, alter, drop and
 * the sql_drop trigger below; as a foreign key to its own table it made
 * every pg_dump warn of a circular constraint.
 */
ALTER TABLE @extschema@._queues DROP CONSTRAINT _queues_dead_letter_queue_fkey;
COMMENT ON TABLE @extschema@._queues IS 'registry of queues: attributes (owner and grants are those of the message table queue_data.q<queue_id>)';

/* Whether caller holds a privilege on the queue (owner, superuser, or granted). */
CREATE OR REPLACE FUNCTION @extschema@._may(q @extschema@._queues, caller oid, privilege text)
	RETURNS boolean LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp AS $$
	SELECT @extschema@._holds(q.queue_id, caller, privilege)
$$;
CREATE OR REPLACE FUNCTION @extschema@._check_attributes(q @extschema@._queues)
	RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	size_limit integer := coalesce(pg_catalog.current_setting('queue.max_message_size_limit', true), '1048576')::integer;
BEGIN
	IF q.fifo IS NULL THEN
		RAISE EXCEPTION 'argument "fifo" must not be null' USING ERRCODE = '22004';
	END IF;
	PERFORM @extschema@._check_interval(q.visibility_timeout, 'visibility_timeout', '0', '12 hours');
	PERFORM @extschema@._check_interval(q.retention, 'retention', '1 minute', '14 days');
	PERFORM @extschema@._check_interval(q.delay, 'delay', '0', q.retention);
	PERFORM @extschema@._check_interval(q.receive_wait, 'receive_wait', '0', '20 seconds');
	PERFORM @extschema@._check_interval(q.deduplication_window, 'deduplication_window', '20 seconds', '7 days');
	IF q.max_message_size IS NULL THEN
		RAISE EXCEPTION 'argument "max_message_size" must not be null' USING ERRCODE = '22004';
	END IF;
	IF q.max_message_size < 1 OR q.max_message_size > size_limit THEN
		RAISE EXCEPTION 'argument "max_message_size" must be between 1 and %', size_limit
			USING ERRCODE = '22023',
			HINT = 'The upper bound is the setting queue.max_message_size_limit.';
	END IF;
	IF q.content_based_deduplication IS NULL THEN
		RAISE EXCEPTION 'argument "content_based_deduplication" must not be null' USING ERRCODE = '22004';
	END IF;
	IF q.deduplication_scope IS NULL THEN
		RAISE EXCEPTION 'argument "deduplication_scope" must not be null' USING ERRCODE = '22004';
	END IF;
	IF q.deduplication_scope NOT IN ('queue', 'message_group') THEN
		RAISE EXCEPTION 'argument "deduplication_scope" must be ''queue'' or ''message_group''' USING ERRCODE = '22023';
	END IF;
	IF q.content_based_deduplication AND NOT q.fifo THEN
		RAISE EXCEPTION 'argument "content_based_deduplication" needs a FIFO queue' USING ERRCODE = '22023';
	END IF;
	IF q.max_receive_count IS NOT NULL AND (q.max_receive_count < 1 OR q.max_receive_count > 1000) THEN
		RAISE EXCEPTION 'argument "max_receive_count" must be between 1 and 1000' USING ERRCODE = '22023';
	END IF;
	IF q.redrive_allow IS NOT NULL THEN
		IF pg_catalog.array_ndims(q.redrive_allow) > 1 THEN
			RAISE EXCEPTION 'argument "redrive_allow" must be a one-dimensional array' USING ERRCODE = '22023';
		END IF;
		IF pg_catalog.array_position(q.redrive_allow, NULL) IS NOT NULL THEN
			RAISE EXCEPTION 'argument "redrive_allow" must not contain nulls' USING ERRCODE = '22004';
		END IF;
		IF pg_catalog.cardinality(q.redrive_allow) > 10 THEN
			RAISE EXCEPTION 'argument "redrive_allow" may name at most 10 source queues' USING ERRCODE = '22023',
				HINT = 'Leave it null (or ''{*}'' in queue.alter) to allow any source.';
		END IF;
		PERFORM @extschema@._check_name(n, 'redrive_allow') FROM pg_catalog.unnest(q.redrive_allow) n;
	END IF;
	IF q.tags IS NULL THEN
		RAISE EXCEPTION 'argument "tags" must not be null' USING ERRCODE = '22004';
	END IF;
	IF pg_catalog.jsonb_typeof(q.tags) <> 'object' THEN
		RAISE EXCEPTION 'argument "tags" must be a JSON object' USING ERRCODE = '22023';
	END IF;
	/* SQS's bounds: 50 tags, keys of 1-128 characters, values of at most 256. */
	IF (SELECT count(*) FROM pg_catalog.jsonb_object_keys(q.tags)) > 50 THEN
		RAISE EXCEPTION 'argument "tags" may hold at most 50 tags' USING ERRCODE = '22023';
	END IF;
	IF EXISTS (SELECT 1 FROM pg_catalog.jsonb_each(q.tags) t
			   WHERE pg_catalog.length(t.key) NOT BETWEEN 1 AND 128
				  OR pg_catalog.length(CASE pg_catalog.jsonb_typeof(t.value)
						WHEN 'string' THEN t.value #>> '{}' ELSE t.value::text END) > 256) THEN
		RAISE EXCEPTION 'argument "tags": keys must have 1 to 128 characters and values at most 256'
			USING ERRCODE = '22023';
	END IF;
END
$$;

CREATE OR REPLACE FUNCTION @extschema@._create(
	queue_name text,
	fifo boolean,
	visibility_timeout interval,
	delay interval,
	retention interval,
	max_message_size integer,
	receive_wait interval,
	content_based_deduplication boolean,
	deduplication_window interval,
	deduplication_scope text,
	dead_letter_queue text,
	max_receive_count integer,
	redrive_allow text[],
	tags jsonb,
	caller oid)
	RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	q @extschema@._queues;
	old @extschema@._queues;
	tbl text;
BEGIN
	PERFORM @extschema@._check_name(queue_name, 'queue_name');
	IF NOT pg_catalog.has_database_privilege(caller, pg_catalog.current_database(), 'CREATE') THEN
		RAISE EXCEPTION 'permission denied to create queue "%"', queue_name
			USING ERRCODE = '42501',
			DETAIL = 'Creating a queue needs the CREATE privilege on the database.';
	END IF;
	q.queue_name := queue_name;
	q.fifo := fifo;
	q.visibility_timeout := visibility_timeout;
	q.delay := delay;
	q.retention := retention;
	q.max_message_size := max_message_size;
	q.receive_wait := receive_wait;
	q.content_based_deduplication := content_based_deduplication;
	q.deduplication_window := deduplication_window;
	q.deduplication_scope := deduplication_scope;
	q.max_receive_count := max_receive_count;
	/* '{*}': any source, stored as null (as leaving it out). */
	q.redrive_allow := CASE WHEN redrive_allow = ARRAY['*'] THEN NULL ELSE redrive_allow END;
	q.tags := tags;
	PERFORM @extschema@._check_attributes(q);
	IF (dead_letter_queue IS NULL) <> (max_receive_count IS NULL) THEN
		RAISE EXCEPTION 'arguments "dead_letter_queue" and "max_receive_count" go together'
			USING ERRCODE = '22023';
	END IF;
	q.dead_letter_queue := @extschema@._dead_letter_id(dead_letter_queue, fifo, NULL, queue_name, caller);

	/* Serialise creators of one name, so "idempotent" holds under races. */
	PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('queue.create:' || queue_name));
	SELECT * INTO old FROM @extschema@._queues r WHERE r.queue_name = queue_name;
	IF FOUND THEN
		IF (old.fifo, old.visibility_timeout, old.delay, old.retention, old.max_message_size,
			old.receive_wait, old.content_based_deduplication, old.deduplication_window,
			old.deduplication_scope, old.dead_letter_queue, old.max_receive_count,
			old.redrive_allow, old.tags)
			IS NOT DISTINCT FROM
		   (q.fifo, q.visibility_timeout, q.delay, q.retention, q.max_message_size,
			q.receive_wait, q.content_based_deduplication, q.deduplication_window,
			q.deduplication_scope, q.dead_letter_queue, q.max_receive_count,
			q.redrive_allow, q.tags) THEN
			RETURN old.queue_id;
		END IF;
		RAISE EXCEPTION 'queue "%" already exists with other attributes', queue_name
			USING ERRCODE = '42710',
			HINT = 'Use queue.alter to change its attributes.';
	END IF;

	INSERT INTO @extschema@._queues (queue_name, fifo, visibility_timeout, delay, retention,
		max_message_size, receive_wait, content_based_deduplication, deduplication_window,
		deduplication_scope, dead_letter_queue, max_receive_count, redrive_allow, tags)
	VALUES (q.queue_name, q.fifo, q.visibility_timeout, q.delay, q.retention,
		q.max_message_size, q.receive_wait, q.content_based_deduplication, q.deduplication_window,
		q.deduplication_scope, q.dead_letter_queue, q.max_receive_count, q.redrive_allow, q.tags)
	RETURNING * INTO q;

	/*
	 * The message table.  Its name is the queue id, never the queue name.
	 * State is derived from timestamps: delayed or in flight while
	 * visible_at is in the future, expired once sent_at + retention has
	 * passed.  The (visible_at, message_id) index makes a receive start at
	 * the first visible message, whatever is in flight or delayed.
	 */
	tbl := pg_catalog.format('queue_data.q%s', q.queue_id);
	EXECUTE pg_catalog.format($ddl$
		CREATE TABLE %1$s (
			message_id bigint NOT NULL,
			visible_at timestamptz NOT NULL,
			sent_at timestamptz NOT NULL,
			receipt bigint,
			sequence_number bigint,
			first_received_at timestamptz,
			receive_count integer NOT NULL DEFAULT 0,
			message_group_id text COLLATE "C",
			deduplication_id text,
			attributes jsonb,
			source_queue_id bigint,
			body text NOT NULL,
			CONSTRAINT q%2$s_pkey PRIMARY KEY (message_id)
		) WITH (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.01,
		        autovacuum_vacuum_insert_scale_factor = 0.01)$ddl$, tbl, q.queue_id);
	/*
	 * A FIFO queue has no such index: its receives go by group (g<id> and
	 * the (message_group_id, message_id) index below), and with no index
	 * on visible_at a receive's update of a message is a HOT update, which
	 * writes no index entry at all.
	 */
	IF NOT q.fifo THEN
		EXECUTE pg_catalog.format('CREATE INDEX q%1$s_visible ON %2$s (visible_at, message_id)',
			q.queue_id, tbl);
	END IF;
	EXECUTE pg_catalog.format('COMMENT ON TABLE %s IS %L', tbl,
		'messages of queue id ' || q.queue_id);

	/*
	 * Deduplication ids accepted within their window (d<id>), on every
	 * queue: standard queues deduplicate when a send gives an id.  The
	 * scope key is '' for scope 'queue' and the group id for scope
	 * 'message_group'.  Rows outlive their messages, as the window does.
	 */
	EXECUTE pg_catalog.format($ddl$
		CREATE TABLE queue_data.d%1$s (
			scope_key text COLLATE "C" NOT NULL,
			deduplication_id text COLLATE "C" NOT NULL,
			message_id bigint NOT NULL,
			accepted_at timestamptz NOT NULL,
			CONSTRAINT d%1$s_pkey PRIMARY KEY (scope_key, deduplication_id)
		) WITH (autovacuum_vacuum_scale_factor = 0.01)$ddl$, q.queue_id);
	EXECUTE pg_catalog.format('CREATE INDEX d%1$s_accepted ON queue_data.d%1$s (accepted_at)', q.queue_id);
	EXECUTE pg_catalog.format('COMMENT ON TABLE queue_data.d%1$s IS %L', q.queue_id,
		'deduplication ids of queue id ' || q.queue_id);

	/*
	 * Receive attempts (a<id>): what a receive with a receive_attempt_id
	 * returned, so a retry within 5 minutes gets the same messages.
	 */
	EXECUTE pg_catalog.format($ddl$
		CREATE TABLE queue_data.a%1$s (
			receive_attempt_id text NOT NULL,
			received_at timestamptz NOT NULL,
			nonce bigint NOT NULL,
			message_ids bigint[] NOT NULL,
			visible_ats timestamptz[] NOT NULL,
			CONSTRAINT a%1$s_pkey PRIMARY KEY (receive_attempt_id)
		)$ddl$, q.queue_id);
	EXECUTE pg_catalog.format('COMMENT ON TABLE queue_data.a%1$s IS %L', q.queue_id,
		'receive attempts of queue id ' || q.queue_id);

	IF q.fifo THEN
		/*
		 * FIFO: messages of a group in order, and the group scheduler
		 * (g<id>): one row per non-empty group with the sequence number of
		 * its head message and the time it can next deliver (its head's
		 * visible_at, or the end of the leases it has in flight), and the
		 * last id its latest receive leased (its in-flight messages lie
		 * between the head and that id).  Receivers and deleters work under the row's lock (receivers skip
		 * a group someone is working on); senders of a group serialise on
		 * a lock of their own and leave an existing row alone (fifo.c).
		 */
		EXECUTE pg_catalog.format('CREATE INDEX q%1$s_group ON %2$s (message_group_id, message_id)',
			q.queue_id, tbl);
		EXECUTE pg_catalog.format($ddl$
			CREATE TABLE queue_data.g%1$s (
				message_group_id text COLLATE "C" NOT NULL,
				head_seq bigint,
				available_at timestamptz,
				leased_upto bigint,
				CONSTRAINT g%1$s_pkey PRIMARY KEY (message_group_id)
			) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01)$ddl$, q.queue_id);
		EXECUTE pg_catalog.format('CREATE INDEX g%1$s_head ON queue_data.g%1$s (head_seq)', q.queue_id);
		EXECUTE pg_catalog.format('COMMENT ON TABLE queue_data.g%1$s IS %L', q.queue_id,
			'message groups of FIFO queue id ' || q.queue_id);
	END IF;
	/*
	 * The caller owns the queue: its message table is theirs, and its ACL
	 * holds the queue's grants (see the top of queue--1.0--1.1.sql).
	 */
	EXECUTE pg_catalog.format('ALTER TABLE %s OWNER TO %s', tbl, caller::regrole);
	PERFORM @extschema@._reset_counters(q.queue_id, false);
	/* Workers re-read the registry on this (worker.c). */
	PERFORM @extschema@._invalidate('@extschema@._queues'::regclass);
	RETURN q.queue_id;
END
$$;

CREATE OR REPLACE FUNCTION @extschema@._alter(
	queue_name text,
	visibility_timeout interval,
	delay interval,
	retention interval,
	max_message_size integer,
	receive_wait interval,
	content_based_deduplication boolean,
	deduplication_window interval,
	deduplication_scope text,
	dead_letter_queue text,
	max_receive_count integer,
	redrive_allow text[],
	tags jsonb,
	caller oid)
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	q @extschema@._queues;
BEGIN
	q := @extschema@._lookup(queue_name, true);
	PERFORM @extschema@._check_manage(q, caller);
	q.visibility_timeout := coalesce(visibility_timeout, q.visibility_timeout);
	q.delay := coalesce(delay, q.delay);
	q.retention := coalesce(retention, q.retention);
	q.max_message_size := coalesce(max_message_size, q.max_message_size);
	q.receive_wait := coalesce(receive_wait, q.receive_wait);
	q.content_based_deduplication := coalesce(content_based_deduplication, q.content_based_deduplication);
	q.deduplication_window := coalesce(deduplication_window, q.deduplication_window);
	q.deduplication_scope := coalesce(deduplication_scope, q.deduplication_scope);
	q.max_receive_count := coalesce(max_receive_count, q.max_receive_count);
	/* '{*}' sets it back to any source (null); null leaves it unchanged. */
	q.redrive_allow := CASE WHEN redrive_allow = ARRAY['*'] THEN NULL
							ELSE coalesce(redrive_allow, q.redrive_allow) END;
	q.tags := coalesce(tags, q.tags);
	PERFORM @extschema@._check_attributes(q);
	/* dead_letter_queue => '' removes the dead-letter queue. */
	IF dead_letter_queue = '' THEN
		q.dead_letter_queue := NULL;
		q.max_receive_count := NULL;
	ELSIF dead_letter_queue IS NOT NULL THEN
		q.dead_letter_queue := @extschema@._dead_letter_id(dead_letter_queue, q.fifo, q.queue_id, q.queue_name, caller);
	END IF;
	IF (q.dead_letter_queue IS NULL) <> (q.max_receive_count IS NULL) THEN
		RAISE EXCEPTION 'arguments "dead_letter_queue" and "max_receive_count" go together'
			USING ERRCODE = '22023';
	END IF;
	UPDATE @extschema@._queues r SET
		visibility_timeout = q.visibility_timeout, delay = q.delay, retention = q.retention,
		max_message_size = q.max_message_size, receive_wait = q.receive_wait,
		content_based_deduplication = q.content_based_deduplication,
		deduplication_window = q.deduplication_window, deduplication_scope = q.deduplication_scope,
		dead_letter_queue = q.dead_letter_queue, max_receive_count = q.max_receive_count,
		redrive_allow = q.redrive_allow, tags = q.tags
	WHERE r.queue_id = q.queue_id;
	PERFORM @extschema@._invalidate(pg_catalog.format('queue_data.q%s', q.queue_id)::regclass);
END
$$;

CREATE OR REPLACE FUNCTION @extschema@._drop(queue_name text, if_exists boolean, force boolean,
	caller oid)
	RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	q @extschema@._queues;
BEGIN
	IF if_exists IS NULL THEN
		RAISE EXCEPTION 'argument "if_exists" must not be null' USING ERRCODE = '22004';
	END IF;
	IF force IS NULL THEN
		RAISE EXCEPTION 'argument "force" must not be null' USING ERRCODE = '22004';
	END IF;
	PERFORM @extschema@._check_name(queue_name, 'queue_name');
	SELECT * INTO q FROM @extschema@._queues r WHERE r.queue_name = queue_name FOR UPDATE;
	IF NOT FOUND THEN
		IF if_exists THEN
			RETURN false;
		END IF;
		RAISE EXCEPTION 'queue "%" does not exist', queue_name USING ERRCODE = '42704';
	END IF;
	PERFORM @extschema@._check_manage(q, caller);
	IF EXISTS (SELECT 1 FROM @extschema@._queues r WHERE r.dead_letter_queue = q.queue_id) THEN
		IF NOT force THEN
			RAISE EXCEPTION 'queue "%" is the dead-letter queue of other queues', queue_name
				USING ERRCODE = '2BP01',
				DETAIL = (SELECT 'Used by: ' || pg_catalog.string_agg(r.queue_name, ', ' ORDER BY r.queue_name)
						  FROM @extschema@._queues r WHERE r.dead_letter_queue = q.queue_id) || '.',
				HINT = 'Drop it with force => true, or alter those queues with dead_letter_queue => ''''.';
		END IF;
		/* Forced: the sources lose their dead-letter queue. */
		PERFORM @extschema@._invalidate(pg_catalog.format('queue_data.q%s', r.queue_id)::regclass)
		FROM @extschema@._queues r WHERE r.dead_letter_queue = q.queue_id;
		UPDATE @extschema@._queues r SET dead_letter_queue = NULL, max_receive_count = NULL
		WHERE r.dead_letter_queue = q.queue_id;
	END IF;
	/* The row first: the sql_drop trigger then finds nothing left to do. */
	DELETE FROM @extschema@._queues r WHERE r.queue_id = q.queue_id;
	EXECUTE pg_catalog.format('DROP TABLE queue_data.q%1$s, queue_data.d%1$s, queue_data.a%1$s', q.queue_id);
	IF q.fifo THEN
		EXECUTE pg_catalog.format('DROP TABLE queue_data.g%s', q.queue_id);
	END IF;
	PERFORM @extschema@._reset_counters(q.queue_id, true);
	PERFORM @extschema@._invalidate('@extschema@._queues'::regclass);
	RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION @extschema@._purge(queue_name text,
	caller oid)
	RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	q @extschema@._queues;
	n bigint;
BEGIN
	q := @extschema@._lookup(queue_name);
	PERFORM @extschema@._check_manage(q, caller);
	/* Deduplication ids stay: their window outlives the messages. */
	IF q.fifo AND pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
		/* Our snapshot would miss sends that commit while we wait below. */
		RAISE EXCEPTION 'queue.purge of a FIFO queue needs READ COMMITTED'
			USING ERRCODE = '25000',
			DETAIL = pg_catalog.format('The transaction is %s.', pg_catalog.current_setting('transaction_isolation'));
	END IF;
	IF q.fifo THEN
		/*
		 * Every FIFO send looks its groups up in g<id> (and holds that
		 * lock to commit) before it inserts a message.  ACCESS EXCLUSIVE
		 * waits for sends already past that point, whose messages the
		 * DELETE below then sees and removes, and holds later sends back
		 * until we commit, when they find their groups gone and make new
		 * rows.  A weaker lock let a send that had found its group's row
		 * commit a message after that row was deleted: a message no
		 * receive would ever return.
		 */
		EXECUTE pg_catalog.format('LOCK TABLE queue_data.g%s IN ACCESS EXCLUSIVE MODE', q.queue_id);
		EXECUTE pg_catalog.format('DELETE FROM queue_data.g%s', q.queue_id);
	END IF;
	EXECUTE pg_catalog.format('DELETE FROM queue_data.q%s', q.queue_id);
	GET DIAGNOSTICS n = ROW_COUNT;
	EXECUTE pg_catalog.format('DELETE FROM queue_data.a%s', q.queue_id);
	RETURN n;
END
$$;

/*
 * queue.grant / queue.revoke: give or take send, receive, manage on a
 * queue, as privileges on its message table (INSERT, UPDATE, TRUNCATE).
 * role_name is a role's name exactly as stored; 'public' in any case means
 * PUBLIC unless a role of exactly that name exists (a role may be called
 * "Public"; none may be called "public"); a name in double quotes is
 * always a role, as in GRANT.  The owner's privileges are not in the ACL's
 * hands: granting to or revoking from the owner changes nothing.
 */
CREATE OR REPLACE FUNCTION @extschema@._grant_revoke(queue_name text, role_name text, privileges text[],
	is_grant boolean, caller oid)
	RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	q @extschema@._queues;
	tbl regclass;
	grantee text;
	rname text;
	modes text;
	p text;
BEGIN
	q := @extschema@._lookup(queue_name, true);
	PERFORM @extschema@._check_manage(q, caller);
	IF role_name IS NULL THEN
		RAISE EXCEPTION 'argument "role_name" must not be null' USING ERRCODE = '22004';
	END IF;
	IF array_ndims(privileges) > 1 THEN
		RAISE EXCEPTION 'argument "privileges" must be a one-dimensional array' USING ERRCODE = '22023';
	END IF;
	IF privileges IS NULL OR array_position(privileges, NULL) IS NOT NULL THEN
		RAISE EXCEPTION 'argument "privileges" must not be null or hold nulls' USING ERRCODE = '22004';
	END IF;
	IF cardinality(privileges) = 0 THEN
		RAISE EXCEPTION 'argument "privileges" must name at least one privilege' USING ERRCODE = '22023';
	END IF;
	FOREACH p IN ARRAY privileges LOOP
		IF p NOT IN ('send', 'receive', 'manage') THEN
			RAISE EXCEPTION 'argument "privileges": unknown privilege "%"', p
				USING ERRCODE = '22023', HINT = 'The privileges are send, receive and manage.';
		END IF;
	END LOOP;
	IF length(role_name) >= 2 AND left(role_name, 1) = '"' AND right(role_name, 1) = '"' THEN
		rname := replace(substr(role_name, 2, length(role_name) - 2), '""', '"');
	ELSIF EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = role_name) THEN
		rname := role_name;
	ELSIF lower(role_name) = 'public' THEN
		grantee := 'PUBLIC';
	ELSE
		rname := role_name;
	END IF;
	IF grantee IS NULL THEN
		IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = rname) THEN
			RAISE EXCEPTION 'role "%" does not exist', rname USING ERRCODE = '42704',
				DETAIL = 'argument "role_name" names no role.';
		END IF;
		grantee := quote_ident(rname);
	END IF;
	tbl := format('queue_data.q%s', q.queue_id)::regclass;
	IF grantee <> 'PUBLIC' AND EXISTS (SELECT 1 FROM pg_catalog.pg_class c
										JOIN pg_catalog.pg_roles r ON r.oid = c.relowner
										WHERE c.oid = tbl AND r.rolname = rname) THEN
		RETURN;
	END IF;
	SELECT string_agg(DISTINCT CASE v WHEN 'send' THEN 'INSERT' WHEN 'receive' THEN 'UPDATE'
									 ELSE 'TRUNCATE' END, ', ')
	INTO modes FROM unnest(privileges) v;
	IF is_grant THEN
		EXECUTE format('GRANT %s ON TABLE %s TO %s', modes, tbl, grantee);
	ELSE
		EXECUTE format('REVOKE %s ON TABLE %s FROM %s', modes, tbl, grantee);
	END IF;
END
$$;

/*
 * Per-queue counts for queue.stats, as the tables' owner (reached through
 * queue._depth_checked, which checks the caller).  Exact while a queue
 * holds at most 10,000 messages (a scan capped at 10,001 rows tells);
 * above that the counts are scaled up from a block sample of about 10,000
 * rows, so reading the view never scans a whole queue.  oldest_sent_at is
 * the least sent_at, not the lowest id's: a redrive gives old ids new
 * times.  Above 10,000 messages it is the least of the sample's and of the
 * 100 lowest ids'.
 */
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
	EXECUTE pg_catalog.format($q$
		SELECT $1 - sent_at FROM %s WHERE visible_at <= $1 AND sent_at > $1 - $2
		ORDER BY visible_at, message_id LIMIT 1$q$, tbl)
		INTO oldest_visible_age USING now_ts, retention;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._depth(bigint, interval) FROM PUBLIC;

/*
 * The admin views show a role only the queues it holds a privilege on
 * (security_barrier: a caller's own functions in a WHERE cannot see the
 * rows filtered out).
 */
CREATE VIEW @extschema@.queues WITH (security_barrier) AS
	SELECT r.queue_name, r.queue_id, r.fifo, r.visibility_timeout, r.delay, r.retention,
		   r.max_message_size, r.receive_wait, r.content_based_deduplication,
		   r.deduplication_window, r.deduplication_scope,
		   d.queue_name AS dead_letter_queue, r.max_receive_count, r.redrive_allow, r.tags,
		   c.relowner::regrole AS owner, r.created_at
	FROM @extschema@._queues r
	JOIN pg_catalog.pg_class c
	  ON c.relnamespace = 'queue_data'::regnamespace AND c.relname = 'q' || r.queue_id
	LEFT JOIN @extschema@._queues d ON d.queue_id = r.dead_letter_queue
	WHERE @extschema@._may_see(r.queue_id);
COMMENT ON VIEW @extschema@.queues IS 'one row a queue the current role holds a privilege on, with its attributes';

CREATE VIEW @extschema@.stats WITH (security_barrier) AS
	SELECT r.queue_name, d.visible, d.in_flight, d.delayed, d.oldest_sent_at, d.oldest_visible_age,
		   c.sent, c.received, c.deleted, c.deduplicated, c.dead_lettered, c.expired,
		   c.waits, c.wakeups
	FROM (SELECT * FROM @extschema@._queues q WHERE @extschema@._may_see(q.queue_id) OFFSET 0) r,
		 LATERAL @extschema@._depth_checked(r.queue_id, r.retention) d,
		 LATERAL @extschema@._counters(r.queue_id) c;
COMMENT ON VIEW @extschema@.stats IS 'per-queue depth and cumulative counters of the queues the current role holds a privilege on';

/* Like the functions, the views are gated by USAGE on schema queue alone. */
GRANT SELECT ON @extschema@.queues, @extschema@.stats TO PUBLIC;

/* ---------------------------------------------------------------------
 * A queue whose message table is dropped by anything but queue.drop
 * (DROP OWNED BY its owner, DROP TABLE by a superuser) is forgotten with
 * the rest of its tables, as queue.drop with force would.
 * --------------------------------------------------------------------- */
CREATE FUNCTION @extschema@._forget_dropped()
	RETURNS event_trigger LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	id bigint;
	others text;
BEGIN
	FOR id IN SELECT substr(o.object_name, 2)::bigint
			  FROM pg_catalog.pg_event_trigger_dropped_objects() o
			  WHERE o.object_type = 'table' AND o.schema_name = 'queue_data'
				AND o.object_name ~ '^q[0-9]+$' LOOP
		IF NOT EXISTS (SELECT 1 FROM @extschema@._queues r WHERE r.queue_id = id) THEN
			CONTINUE;			/* queue.drop, which deleted the row first */
		END IF;
		/* Its sources lose their dead-letter queue, as with drop's force. */
		PERFORM @extschema@._invalidate(pg_catalog.to_regclass(pg_catalog.format('queue_data.q%s', r.queue_id)))
		FROM @extschema@._queues r WHERE r.dead_letter_queue = id;
		UPDATE @extschema@._queues r SET dead_letter_queue = NULL, max_receive_count = NULL
		WHERE r.dead_letter_queue = id;
		DELETE FROM @extschema@._queues r WHERE r.queue_id = id;
		SELECT pg_catalog.string_agg(c.oid::regclass::text, ', ') INTO others
		FROM pg_catalog.pg_class c
		WHERE c.relnamespace = 'queue_data'::regnamespace AND c.relkind = 'r'
		  AND c.relname IN ('d' || id, 'a' || id, 'g' || id);
		IF others IS NOT NULL THEN
			EXECUTE 'DROP TABLE ' || others;
		END IF;
		PERFORM @extschema@._reset_counters(id, true);
		PERFORM @extschema@._invalidate('@extschema@._queues'::regclass);
	END LOOP;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._forget_dropped() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._forget_dropped() IS 'forget queues whose message tables were dropped (DROP OWNED, DROP TABLE)';

CREATE EVENT TRIGGER queue_forget_dropped_queues ON sql_drop
	EXECUTE FUNCTION @extschema@._forget_dropped();
