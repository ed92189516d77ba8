/* queue--1.0.sql: SQS-style message queues as SQL */

\echo Use "CREATE EXTENSION queue" to load this file. \quit

/*
 * Layout.  The schema "queue" (created by CREATE EXTENSION) holds the public
 * API and the registry; the schema "queue_data" holds one message table per
 * queue, named q<queue_id>.  A queue's name is data: it is only ever stored
 * in the registry and compared, never spliced into SQL.  Nothing here is
 * granted to PUBLIC; a DBA grants USAGE on schema queue to the roles that
 * use queues.
 */
CREATE SCHEMA queue_data;
REVOKE ALL ON SCHEMA queue_data FROM PUBLIC;
COMMENT ON SCHEMA queue_data IS 'message tables of the queue extension, one per queue (q<queue_id>)';

CREATE SEQUENCE queue_data.message_id_seq;
COMMENT ON SEQUENCE queue_data.message_id_seq IS 'message ids, shared by every queue';

/* The registry: one row a queue. */
CREATE TABLE @extschema@._queues (
	queue_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	queue_name text NOT NULL UNIQUE,
	fifo boolean NOT NULL,
	visibility_timeout interval NOT NULL,
	delay interval NOT NULL,
	retention interval NOT NULL,
	max_message_size integer NOT NULL,
	receive_wait interval NOT NULL,
	content_based_deduplication boolean NOT NULL,
	deduplication_window interval NOT NULL,
	deduplication_scope text NOT NULL,
	dead_letter_queue bigint REFERENCES @extschema@._queues (queue_id),
	max_receive_count integer,
	redrive_allow text[],
	tags jsonb NOT NULL,
	owner oid NOT NULL,
	send_roles oid[] NOT NULL DEFAULT '{}',
	receive_roles oid[] NOT NULL DEFAULT '{}',
	manage_roles oid[] NOT NULL DEFAULT '{}',
	created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	msg_relid oid
);
REVOKE ALL ON @extschema@._queues FROM PUBLIC;
COMMENT ON TABLE @extschema@._queues IS 'registry of queues: attributes, owner and message table';
SELECT pg_catalog.pg_extension_config_dump('@extschema@._queues', '');

/*
 * The per-database secret that signs receipts, so a receipt cannot be forged
 * from a message id.  sha256 of two random UUIDs gives 32 random bytes
 * without needing pgcrypto.
 */
CREATE TABLE @extschema@._secret (
	key bytea NOT NULL
);
REVOKE ALL ON @extschema@._secret FROM PUBLIC;
INSERT INTO @extschema@._secret
	SELECT pg_catalog.sha256(pg_catalog.convert_to(
		pg_catalog.gen_random_uuid()::text || pg_catalog.gen_random_uuid()::text, 'UTF8'));
COMMENT ON TABLE @extschema@._secret IS 'per-database key that signs receipts';
SELECT pg_catalog.pg_extension_config_dump('@extschema@._secret', '');

CREATE TYPE @extschema@.message AS (
	message_id bigint,
	receipt text,
	body text,
	attributes jsonb,
	message_group_id text,
	deduplication_id text,
	sequence_number bigint,
	receive_count integer,
	sent_at timestamptz,
	first_received_at timestamptz,
	visible_at timestamptz
);
COMMENT ON TYPE @extschema@.message IS 'a received or peeked message';

/* ---------------------------------------------------------------------
 * C helpers used by the administrative functions below.
 * --------------------------------------------------------------------- */
CREATE FUNCTION @extschema@._check_name(name text, argname text)
	RETURNS void LANGUAGE C AS 'MODULE_PATHNAME', 'queue_check_name_sql';
COMMENT ON FUNCTION @extschema@._check_name(text, text) IS 'raise 22004/42602/42622 unless a valid queue name';

CREATE FUNCTION @extschema@._invalidate(relid oid)
	RETURNS void LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'queue_invalidate_sql';
COMMENT ON FUNCTION @extschema@._invalidate(oid) IS 'tell every backend to forget its cached metadata of the queue on this table';

CREATE FUNCTION @extschema@._register()
	RETURNS void LANGUAGE C AS 'MODULE_PATHNAME', 'queue_register_sql';
COMMENT ON FUNCTION @extschema@._register() IS 'ask the launcher for a queue worker in this database';

CREATE FUNCTION @extschema@._reset_counters(queue_id bigint, dropped boolean)
	RETURNS void LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'queue_reset_counters_sql';
COMMENT ON FUNCTION @extschema@._reset_counters(bigint, boolean) IS 'zero the shared counters of a new queue id, or free those of a dropped one';

CREATE FUNCTION @extschema@._preloaded()
	RETURNS boolean LANGUAGE C AS 'MODULE_PATHNAME', 'queue_preloaded_sql';
COMMENT ON FUNCTION @extschema@._preloaded() IS 'true when queue is in shared_preload_libraries';

REVOKE ALL ON FUNCTION @extschema@._check_name(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@._invalidate(oid) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@._preloaded() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@._register() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@._reset_counters(bigint, boolean) FROM PUBLIC;

/* Check that an interval lies in [lo, hi]; 22004 / 22023 naming the argument. */
CREATE FUNCTION @extschema@._check_interval(val interval, argname text, lo interval, hi interval)
	RETURNS void LANGUAGE plpgsql IMMUTABLE
	SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF val IS NULL THEN
		RAISE EXCEPTION 'argument "%" must not be null', argname USING ERRCODE = '22004';
	END IF;
	IF val < lo OR val > hi THEN
		RAISE EXCEPTION 'argument "%" must be between % and %', argname, lo, hi
			USING ERRCODE = '22023', DETAIL = format('The value given was %s.', val);
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._check_interval(interval, text, interval, interval) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._check_interval(interval, text, interval, interval) IS 'range check of an interval argument';

/*
 * Validate a full set of attributes (after defaults and alter's merging) and
 * raise on the first bad one.  Shared by create and alter so the two cannot
 * drift apart.
 */
CREATE FUNCTION @extschema@._check_attributes(q @extschema@._queues)
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
		PERFORM @extschema@._check_name(n, 'redrive_allow') FROM pg_catalog.unnest(q.redrive_allow) n;
	END IF;
	IF q.tags IS NULL THEN
		RAISE EXCEPTION 'argument "tags" must not be null' USING ERRCODE = '22004';
	END IF;
	IF pg_catalog.jsonb_typeof(q.tags) <> 'object' THEN
		RAISE EXCEPTION 'argument "tags" must be a JSON object' USING ERRCODE = '22023';
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._check_attributes(@extschema@._queues) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._check_attributes(@extschema@._queues) IS 'validate queue attributes';

/* The queue's registry row by name, locked; 42704 if there is none. */
CREATE FUNCTION @extschema@._lookup(queue_name text, for_update boolean DEFAULT false)
	RETURNS @extschema@._queues LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	q @extschema@._queues;
BEGIN
	PERFORM @extschema@._check_name(queue_name, 'queue_name');
	IF for_update THEN
		SELECT * INTO q FROM @extschema@._queues r WHERE r.queue_name = queue_name FOR UPDATE;
	ELSE
		SELECT * INTO q FROM @extschema@._queues r WHERE r.queue_name = queue_name;
	END IF;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'queue "%" does not exist', queue_name USING ERRCODE = '42704';
	END IF;
	RETURN q;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._lookup(text, boolean) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._lookup(text, boolean) IS 'registry row of a queue by name';

/* Whether caller holds a privilege on the queue (owner, superuser, or granted). */
CREATE FUNCTION @extschema@._may(q @extschema@._queues, caller oid, privilege text)
	RETURNS boolean LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp AS $$
	SELECT caller = q.owner
		OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.oid = caller AND r.rolsuper)
		OR pg_catalog.pg_has_role(caller, q.owner, 'USAGE')
		OR EXISTS (SELECT 1 FROM pg_catalog.unnest(CASE privilege
						WHEN 'send' THEN q.send_roles
						WHEN 'receive' THEN q.receive_roles
						ELSE q.manage_roles END) g
				   WHERE g = 0 OR pg_catalog.pg_has_role(caller, g, 'USAGE'))
$$;
REVOKE ALL ON FUNCTION @extschema@._may(@extschema@._queues, oid, text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._may(@extschema@._queues, oid, text) IS 'whether a role holds a privilege on a queue';

/* 42501 unless caller may manage the queue. */
CREATE FUNCTION @extschema@._check_manage(q @extschema@._queues, caller oid)
	RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF @extschema@._may(q, caller, 'manage') THEN
		RETURN;
	END IF;
	RAISE EXCEPTION 'permission denied for queue "%"', q.queue_name
		USING ERRCODE = '42501',
		DETAIL = 'This needs the manage privilege on the queue.',
		HINT = pg_catalog.format('Its owner can run queue.grant(%L, <role>, ''{manage}'').', q.queue_name);
END
$$;
REVOKE ALL ON FUNCTION @extschema@._check_manage(@extschema@._queues, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._check_manage(@extschema@._queues, oid) IS 'refuse (42501) a caller who may not manage the queue';

/*
 * Resolve a dead-letter queue name to its id, with its rules: it exists, is
 * of the source's type, is not the source, lets the source in by its
 * redrive_allow, and does not lead back to the source (no cycles).
 */
CREATE FUNCTION @extschema@._dead_letter_id(dlq_name text, fifo boolean, self_id bigint, self_name text, caller oid)
	RETURNS bigint LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	d @extschema@._queues;
	hop bigint;
	hops integer := 0;
BEGIN
	IF dlq_name IS NULL THEN
		RETURN NULL;
	END IF;
	PERFORM @extschema@._check_name(dlq_name, 'dead_letter_queue');
	SELECT * INTO d FROM @extschema@._queues r WHERE r.queue_name = dlq_name;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'dead-letter queue "%" does not exist', dlq_name USING ERRCODE = '42704';
	END IF;
	IF d.queue_id = self_id THEN
		RAISE EXCEPTION 'argument "dead_letter_queue" names the queue itself' USING ERRCODE = '22023';
	END IF;
	/* Dead letters are sends into that queue: the caller must hold send. */
	IF NOT @extschema@._may(d, caller, 'send') THEN
		RAISE EXCEPTION 'permission denied for queue "%"', dlq_name
			USING ERRCODE = '42501',
			DETAIL = 'Naming a dead-letter queue needs the send privilege on it.';
	END IF;
	IF d.fifo <> fifo THEN
		RAISE EXCEPTION 'argument "dead_letter_queue" must be a % queue like its source', CASE WHEN fifo THEN 'FIFO' ELSE 'standard' END
			USING ERRCODE = '22023';
	END IF;
	IF d.redrive_allow IS NOT NULL AND NOT self_name = ANY (d.redrive_allow) THEN
		RAISE EXCEPTION 'argument "dead_letter_queue": queue "%" does not allow "%" as a source', dlq_name, self_name
			USING ERRCODE = '22023',
			HINT = 'Add the source to the dead-letter queue''s redrive_allow.';
	END IF;
	hop := d.dead_letter_queue;
	WHILE hop IS NOT NULL LOOP
		IF hop = self_id OR hops > 1000 THEN
			RAISE EXCEPTION 'argument "dead_letter_queue": "%" leads back to "%"', dlq_name, self_name
				USING ERRCODE = '22023', DETAIL = 'Dead-letter queues may not form a cycle.';
		END IF;
		SELECT r.dead_letter_queue INTO hop FROM @extschema@._queues r WHERE r.queue_id = hop;
		hops := hops + 1;
	END LOOP;
	RETURN d.queue_id;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._dead_letter_id(text, boolean, bigint, text, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._dead_letter_id(text, boolean, bigint, text, oid) IS 'id of a dead-letter queue, checked';

/* ---------------------------------------------------------------------
 * Queues
 * --------------------------------------------------------------------- */
CREATE FUNCTION @extschema@._create(
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
	q.redrive_allow := redrive_allow;
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
		deduplication_scope, dead_letter_queue, max_receive_count, redrive_allow, tags, owner)
	VALUES (q.queue_name, q.fifo, q.visibility_timeout, q.delay, q.retention,
		q.max_message_size, q.receive_wait, q.content_based_deduplication, q.deduplication_window,
		q.deduplication_scope, q.dead_letter_queue, q.max_receive_count, q.redrive_allow, q.tags,
		caller)
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
	UPDATE @extschema@._queues r SET msg_relid = tbl::regclass::oid WHERE r.queue_id = q.queue_id;
	PERFORM @extschema@._reset_counters(q.queue_id, false);
	/* Workers re-read the registry on this (worker.c). */
	PERFORM @extschema@._invalidate('@extschema@._queues'::regclass);
	RETURN q.queue_id;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._create(text, boolean, interval, interval, interval, integer, interval, boolean, interval, text, text, integer, text[], jsonb, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._create(text, boolean, interval, interval, interval, integer, interval, boolean, interval, text, text, integer, text[], jsonb, oid) IS 'queue.create as the tables'' owner, for caller';

CREATE FUNCTION @extschema@._alter(
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
	q.redrive_allow := coalesce(redrive_allow, q.redrive_allow);
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
	PERFORM @extschema@._invalidate(q.msg_relid);
END
$$;
REVOKE ALL ON FUNCTION @extschema@._alter(text, interval, interval, interval, integer, interval, boolean, interval, text, text, integer, text[], jsonb, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._alter(text, interval, interval, interval, integer, interval, boolean, interval, text, text, integer, text[], jsonb, oid) IS 'queue.alter as the tables'' owner, for caller';

CREATE FUNCTION @extschema@._drop(queue_name text, if_exists boolean, force boolean,
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
		PERFORM @extschema@._invalidate(r.msg_relid)
		FROM @extschema@._queues r WHERE r.dead_letter_queue = q.queue_id;
		UPDATE @extschema@._queues r SET dead_letter_queue = NULL, max_receive_count = NULL
		WHERE r.dead_letter_queue = q.queue_id;
	END IF;
	EXECUTE pg_catalog.format('DROP TABLE queue_data.q%1$s, queue_data.d%1$s, queue_data.a%1$s', q.queue_id);
	IF q.fifo THEN
		EXECUTE pg_catalog.format('DROP TABLE queue_data.g%s', q.queue_id);
	END IF;
	DELETE FROM @extschema@._queues r WHERE r.queue_id = q.queue_id;
	PERFORM @extschema@._reset_counters(q.queue_id, true);
	PERFORM @extschema@._invalidate('@extschema@._queues'::regclass);
	RETURN true;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._drop(text, boolean, boolean, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._drop(text, boolean, boolean, oid) IS 'queue.drop as the tables'' owner, for caller';

CREATE FUNCTION @extschema@._purge(queue_name text,
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
	IF q.fifo THEN
		EXECUTE pg_catalog.format('LOCK TABLE queue_data.g%s IN SHARE ROW EXCLUSIVE MODE', q.queue_id);
		EXECUTE pg_catalog.format('DELETE FROM queue_data.g%s', q.queue_id);
	END IF;
	EXECUTE pg_catalog.format('DELETE FROM queue_data.q%s', q.queue_id);
	GET DIAGNOSTICS n = ROW_COUNT;
	EXECUTE pg_catalog.format('DELETE FROM queue_data.a%s', q.queue_id);
	RETURN n;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._purge(text, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._purge(text, oid) IS 'queue.purge as the tables'' owner, for caller';

/*
 * queue.grant / queue.revoke: give or take send, receive, manage on a
 * queue.  role_name is a role's name exactly as stored, or 'public'.
 */
CREATE FUNCTION @extschema@._grant_revoke(queue_name text, role_name text, privileges text[],
	is_grant boolean, caller oid)
	RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	q @extschema@._queues;
	grantee oid;
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
	IF lower(role_name) = 'public' THEN
		grantee := 0;
	ELSE
		SELECT r.oid INTO grantee FROM pg_catalog.pg_roles r WHERE r.rolname = role_name;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'role "%" does not exist', role_name USING ERRCODE = '42704';
		END IF;
	END IF;
	IF is_grant THEN
		UPDATE @extschema@._queues r SET
			send_roles = CASE WHEN 'send' = ANY (privileges) AND NOT grantee = ANY (r.send_roles)
							  THEN r.send_roles || grantee ELSE r.send_roles END,
			receive_roles = CASE WHEN 'receive' = ANY (privileges) AND NOT grantee = ANY (r.receive_roles)
								 THEN r.receive_roles || grantee ELSE r.receive_roles END,
			manage_roles = CASE WHEN 'manage' = ANY (privileges) AND NOT grantee = ANY (r.manage_roles)
								THEN r.manage_roles || grantee ELSE r.manage_roles END
		WHERE r.queue_id = q.queue_id;
	ELSE
		UPDATE @extschema@._queues r SET
			send_roles = CASE WHEN 'send' = ANY (privileges) THEN array_remove(r.send_roles, grantee) ELSE r.send_roles END,
			receive_roles = CASE WHEN 'receive' = ANY (privileges) THEN array_remove(r.receive_roles, grantee) ELSE r.receive_roles END,
			manage_roles = CASE WHEN 'manage' = ANY (privileges) THEN array_remove(r.manage_roles, grantee) ELSE r.manage_roles END
		WHERE r.queue_id = q.queue_id;
	END IF;
	PERFORM @extschema@._invalidate(q.msg_relid);
END
$$;
REVOKE ALL ON FUNCTION @extschema@._grant_revoke(text, text, text[], boolean, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._grant_revoke(text, text, text[], boolean, oid) IS 'queue.grant and queue.revoke as the tables'' owner, for caller';

CREATE FUNCTION @extschema@._grant(queue_name text, role_name text, privileges text[], caller oid)
	RETURNS void LANGUAGE sql
	SET search_path = pg_catalog, pg_temp
	AS $$ SELECT @extschema@._grant_revoke(queue_name, role_name, privileges, true, caller) $$;
REVOKE ALL ON FUNCTION @extschema@._grant(text, text, text[], oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._grant(text, text, text[], oid) IS 'queue.grant as the tables'' owner, for caller';

CREATE FUNCTION @extschema@._revoke(queue_name text, role_name text, privileges text[], caller oid)
	RETURNS void LANGUAGE sql
	SET search_path = pg_catalog, pg_temp
	AS $$ SELECT @extschema@._grant_revoke(queue_name, role_name, privileges, false, caller) $$;
REVOKE ALL ON FUNCTION @extschema@._revoke(text, text, text[], oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._revoke(text, text, text[], oid) IS 'queue.revoke as the tables'' owner, for caller';

/*
 * The administrative entry points: C wrappers (acl.c) that note the caller
 * and call the PL/pgSQL above as the tables' owner.
 */
CREATE FUNCTION @extschema@.create(
	queue_name text,
	fifo boolean DEFAULT false,
	visibility_timeout interval DEFAULT '30 seconds',
	delay interval DEFAULT '0',
	retention interval DEFAULT '4 days',
	max_message_size integer DEFAULT 1048576,
	receive_wait interval DEFAULT '0',
	content_based_deduplication boolean DEFAULT false,
	deduplication_window interval DEFAULT '5 minutes',
	deduplication_scope text DEFAULT 'queue',
	dead_letter_queue text DEFAULT NULL,
	max_receive_count integer DEFAULT NULL,
	redrive_allow text[] DEFAULT NULL,
	tags jsonb DEFAULT '{}')
	RETURNS bigint
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
COMMENT ON FUNCTION @extschema@.create(text, boolean, interval, interval, interval, integer, interval, boolean, interval, text, text, integer, text[], jsonb) IS 'create a queue; returns its id (idempotent for identical attributes)';

CREATE FUNCTION @extschema@.alter(
	queue_name text,
	visibility_timeout interval DEFAULT NULL,
	delay interval DEFAULT NULL,
	retention interval DEFAULT NULL,
	max_message_size integer DEFAULT NULL,
	receive_wait interval DEFAULT NULL,
	content_based_deduplication boolean DEFAULT NULL,
	deduplication_window interval DEFAULT NULL,
	deduplication_scope text DEFAULT NULL,
	dead_letter_queue text DEFAULT NULL,
	max_receive_count integer DEFAULT NULL,
	redrive_allow text[] DEFAULT NULL,
	tags jsonb DEFAULT NULL)
	RETURNS void
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
COMMENT ON FUNCTION @extschema@.alter(text, interval, interval, interval, integer, interval, boolean, interval, text, text, integer, text[], jsonb) IS 'change attributes of a queue (null leaves one unchanged; dead_letter_queue => '' removes it)';

CREATE FUNCTION @extschema@.drop(queue_name text, if_exists boolean DEFAULT false, force boolean DEFAULT false)
	RETURNS boolean
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
COMMENT ON FUNCTION @extschema@.drop(text, boolean, boolean) IS 'drop a queue and its messages (force: even if it is a dead-letter queue)';

CREATE FUNCTION @extschema@.purge(queue_name text)
	RETURNS bigint
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
COMMENT ON FUNCTION @extschema@.purge(text) IS 'delete every message of a queue; returns how many';

CREATE FUNCTION @extschema@.grant(queue_name text, role_name text, privileges text[])
	RETURNS void
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
COMMENT ON FUNCTION @extschema@.grant(text, text, text[]) IS 'give a role send, receive and/or manage on a queue';

CREATE FUNCTION @extschema@.revoke(queue_name text, role_name text, privileges text[])
	RETURNS void
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
COMMENT ON FUNCTION @extschema@.revoke(text, text, text[]) IS 'take send, receive and/or manage on a queue from a role';

CREATE VIEW @extschema@.queues AS
	SELECT r.queue_name, r.queue_id, r.fifo, r.visibility_timeout, r.delay, r.retention,
		   r.max_message_size, r.receive_wait, r.content_based_deduplication,
		   r.deduplication_window, r.deduplication_scope,
		   d.queue_name AS dead_letter_queue, r.max_receive_count, r.redrive_allow, r.tags,
		   r.owner::regrole AS owner, r.created_at
	FROM @extschema@._queues r
	LEFT JOIN @extschema@._queues d ON d.queue_id = r.dead_letter_queue;
COMMENT ON VIEW @extschema@.queues IS 'one row a queue, with its attributes';

/*
 * Per-queue counts for queue.stats.  Exact while a queue holds at most 10,000
 * messages (a scan capped at 10,001 rows tells); above that the counts are
 * scaled up from a block sample of about 10,000 rows, so reading the view
 * never scans a whole queue.
 */
CREATE FUNCTION @extschema@._depth(queue_id bigint, retention interval,
	OUT visible bigint, OUT in_flight bigint, OUT delayed bigint,
	OUT oldest_sent_at timestamptz, OUT oldest_visible_age interval)
	LANGUAGE plpgsql SECURITY DEFINER
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
				   count(*) FILTER (WHERE visible_at > $1 AND receive_count = 0)
			FROM %s WHERE sent_at > $1 - $2$q$, tbl)
			INTO visible, in_flight, delayed USING now_ts, retention;
	ELSE
		SELECT c.reltuples INTO est FROM pg_catalog.pg_class c WHERE c.oid = tbl::regclass;
		pct := least(100.0, 100.0 * 10000 / greatest(est, 10000));
		EXECUTE pg_catalog.format($q$
			SELECT (count(*) FILTER (WHERE visible_at <= $1) * 100.0 / $3)::bigint,
				   (count(*) FILTER (WHERE visible_at > $1 AND receive_count > 0) * 100.0 / $3)::bigint,
				   (count(*) FILTER (WHERE visible_at > $1 AND receive_count = 0) * 100.0 / $3)::bigint
			FROM %s TABLESAMPLE SYSTEM ($3) WHERE sent_at > $1 - $2$q$, tbl)
			INTO visible, in_flight, delayed USING now_ts, retention, pct;
	END IF;
	EXECUTE pg_catalog.format('SELECT sent_at FROM %s WHERE sent_at > $1 - $2 ORDER BY message_id LIMIT 1', tbl)
		INTO oldest_sent_at USING now_ts, retention;
	EXECUTE pg_catalog.format($q$
		SELECT $1 - sent_at FROM %s WHERE visible_at <= $1 AND sent_at > $1 - $2
		ORDER BY visible_at, message_id LIMIT 1$q$, tbl)
		INTO oldest_visible_age USING now_ts, retention;
END
$$;
COMMENT ON FUNCTION @extschema@._depth(bigint, interval) IS 'message counts of one queue for queue.stats';

CREATE FUNCTION @extschema@._counters(queue_id bigint,
	OUT sent bigint, OUT received bigint, OUT deleted bigint, OUT deduplicated bigint,
	OUT dead_lettered bigint, OUT expired bigint, OUT waits bigint, OUT wakeups bigint)
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_counters_sql';
COMMENT ON FUNCTION @extschema@._counters(bigint) IS 'cumulative per-queue counters from shared memory (null without preload)';

CREATE VIEW @extschema@.stats AS
	SELECT r.queue_name, d.visible, d.in_flight, d.delayed, d.oldest_sent_at, d.oldest_visible_age,
		   c.sent, c.received, c.deleted, c.deduplicated, c.dead_lettered, c.expired,
		   c.waits, c.wakeups
	FROM @extschema@._queues r,
		 LATERAL @extschema@._depth(r.queue_id, r.retention) d,
		 LATERAL @extschema@._counters(r.queue_id) c;
COMMENT ON VIEW @extschema@.stats IS 'per-queue depth and cumulative counters';

/* Like the functions, the views are gated by USAGE on schema queue alone. */
GRANT SELECT ON @extschema@.queues, @extschema@.stats TO PUBLIC;

/* ---------------------------------------------------------------------
 * Messages: the hot path, in C with plans prepared once per backend.
 * --------------------------------------------------------------------- */
CREATE FUNCTION @extschema@.send(queue_name text, body text, delay interval DEFAULT NULL,
	message_group_id text DEFAULT NULL, deduplication_id text DEFAULT NULL,
	attributes jsonb DEFAULT NULL)
	RETURNS TABLE (message_id bigint, sequence_number bigint, duplicate boolean)
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'queue_send';
COMMENT ON FUNCTION @extschema@.send(text, text, interval, text, text, jsonb) IS 'send a text message';

CREATE FUNCTION @extschema@.send(queue_name text, body jsonb, delay interval DEFAULT NULL,
	message_group_id text DEFAULT NULL, deduplication_id text DEFAULT NULL,
	attributes jsonb DEFAULT NULL)
	RETURNS TABLE (message_id bigint, sequence_number bigint, duplicate boolean)
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'queue_send';
COMMENT ON FUNCTION @extschema@.send(text, jsonb, interval, text, text, jsonb) IS 'send a jsonb message (stored and returned as its text)';

CREATE FUNCTION @extschema@.send_batch(queue_name text, bodies text[], delay interval DEFAULT NULL,
	message_group_ids text[] DEFAULT NULL, deduplication_ids text[] DEFAULT NULL,
	attributes jsonb[] DEFAULT NULL)
	RETURNS TABLE (ordinal integer, message_id bigint, sequence_number bigint, duplicate boolean)
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'queue_send_batch';
COMMENT ON FUNCTION @extschema@.send_batch(text, text[], interval, text[], text[], jsonb[]) IS 'send text messages, all or none';

CREATE FUNCTION @extschema@.send_batch(queue_name text, bodies jsonb[], delay interval DEFAULT NULL,
	message_group_ids text[] DEFAULT NULL, deduplication_ids text[] DEFAULT NULL,
	attributes jsonb[] DEFAULT NULL)
	RETURNS TABLE (ordinal integer, message_id bigint, sequence_number bigint, duplicate boolean)
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'queue_send_batch';
COMMENT ON FUNCTION @extschema@.send_batch(text, jsonb[], interval, text[], text[], jsonb[]) IS 'send jsonb messages, all or none';

CREATE FUNCTION @extschema@.receive(queue_name text, max_messages integer DEFAULT 1,
	visibility_timeout interval DEFAULT NULL, wait interval DEFAULT NULL,
	receive_attempt_id text DEFAULT NULL)
	RETURNS SETOF @extschema@.message
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'queue_receive';
COMMENT ON FUNCTION @extschema@.receive(text, integer, interval, interval, text) IS 'lease up to max_messages visible messages';

CREATE FUNCTION @extschema@.delete(queue_name text, receipt text)
	RETURNS boolean
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'queue_delete';
COMMENT ON FUNCTION @extschema@.delete(text, text) IS 'delete a received message by its latest receipt';

CREATE FUNCTION @extschema@.delete_batch(queue_name text, receipts text[])
	RETURNS TABLE (ordinal integer, deleted boolean)
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'queue_delete_batch';
COMMENT ON FUNCTION @extschema@.delete_batch(text, text[]) IS 'delete received messages by their latest receipts, all or none';

CREATE FUNCTION @extschema@.change_visibility(queue_name text, receipt text, visibility_timeout interval)
	RETURNS void
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'queue_change_visibility';
COMMENT ON FUNCTION @extschema@.change_visibility(text, text, interval) IS 'set when a received message becomes visible again, counted from now';

CREATE FUNCTION @extschema@.change_visibility_batch(queue_name text, receipts text[], visibility_timeout interval)
	RETURNS TABLE (ordinal integer, changed boolean)
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'queue_change_visibility_batch';
COMMENT ON FUNCTION @extschema@.change_visibility_batch(text, text[], interval) IS 'change_visibility for many receipts, all or none';

CREATE FUNCTION @extschema@.redrive(source_queue text, destination_queue text DEFAULT NULL,
	max_messages bigint DEFAULT NULL)
	RETURNS bigint
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'queue_redrive';
COMMENT ON FUNCTION @extschema@.redrive(text, text, bigint) IS 'move dead letters back to the queue each came from (or to destination_queue)';

CREATE FUNCTION @extschema@.peek(queue_name text, max_messages integer DEFAULT 10)
	RETURNS SETOF @extschema@.message
	LANGUAGE C
	AS 'MODULE_PATHNAME', 'queue_peek';
COMMENT ON FUNCTION @extschema@.peek(text, integer) IS 'look at messages in delivery order without changing anything';

/*
 * The API functions keep PostgreSQL's default EXECUTE for PUBLIC: what gates
 * them is USAGE on schema queue, which the extension grants to nobody.  The
 * internal helpers were revoked from PUBLIC above; _depth and _counters stay
 * callable because queue.stats calls them as the reading role.
 */

SELECT @extschema@._register();

DO $$
BEGIN
	IF NOT @extschema@._preloaded() THEN
		RAISE NOTICE 'queue is not in shared_preload_libraries: long polling falls back to a timed re-check and counters are off'
			USING HINT = 'Add queue to shared_preload_libraries and restart the server.';
	END IF;
END
$$;
