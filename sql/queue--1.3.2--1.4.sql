/* queue--1.3.2--1.4.sql: many queues, as rows in shared tables (issue 25) */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.4'" to load this file. \quit

/*
 * DESIGN.md "Storage": a queue is rows in tables shared by every queue of
 * the database (the default from 1.4), or tables of its own (dedicated, as
 * every queue was before).  Nothing moves here: every queue that exists
 * stays dedicated; queues created from now on are shared unless asked for.
 *
 * The shared tables have the columns of a queue's own tables plus their
 * key, last, so the C code that reads columns by number reads the same
 * numbers in both layouts:
 *  - messages and fifo_messages (standard and FIFO queues: a FIFO receive
 *    goes by group and needs no visible_at index, which keeps its leases
 *    HOT updates) and groups, keyed by store_id: the queue's id, or a new
 *    one after a purge, which leaves the old rows to the worker;
 *  - dedup_ids and receive_attempts, keyed by queue_id (a purge keeps the
 *    deduplication ids: their window outlives the messages).
 * A shared queue's owner and grants are columns of its registry row, since
 * it has no table to carry them; the roles they name hold SELECT on the
 * empty table queue._queue_roles, so PostgreSQL refuses to drop them
 * (role_refs.c), as it does for the owners of a dedicated queue's table.
 */

ALTER TABLE @extschema@._queues
	ADD COLUMN dedicated boolean NOT NULL DEFAULT true,
	ADD COLUMN store_id bigint,
	ADD COLUMN owner regrole,
	ADD COLUMN send_roles regrole[],
	ADD COLUMN receive_roles regrole[],
	ADD COLUMN manage_roles regrole[];
/* (true for the rows 1.3's functions write: the dedicated path's) */
COMMENT ON COLUMN @extschema@._queues.dedicated IS 'tables of its own (queue_data.q<queue_id> ...), or rows in the shared tables';
COMMENT ON COLUMN @extschema@._queues.store_id IS 'shared: the key of its messages and groups when not its queue_id (after a purge or a move)';
COMMENT ON COLUMN @extschema@._queues.owner IS 'shared: its owner (dedicated: the owner of its message table)';
COMMENT ON COLUMN @extschema@._queues.send_roles IS 'shared: roles granted send (''-'': PUBLIC)';
COMMENT ON COLUMN @extschema@._queues.receive_roles IS 'shared: roles granted receive (''-'': PUBLIC)';
COMMENT ON COLUMN @extschema@._queues.manage_roles IS 'shared: roles granted manage (''-'': PUBLIC)';
COMMENT ON TABLE @extschema@._queues IS 'registry of queues: attributes, layout, and the owner and grants of shared queues (those of a dedicated queue are its message table''s)';

CREATE TABLE queue_data.messages (
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
	store_id bigint NOT NULL,
	CONSTRAINT messages_pkey PRIMARY KEY (store_id, message_id)
) WITH (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.01,
        autovacuum_vacuum_insert_scale_factor = 0.01);
CREATE INDEX messages_visible ON queue_data.messages (store_id, visible_at, message_id);
COMMENT ON TABLE queue_data.messages IS 'messages of the shared standard queues';

CREATE TABLE queue_data.fifo_messages (
	LIKE queue_data.messages INCLUDING DEFAULTS,
	CONSTRAINT fifo_messages_pkey PRIMARY KEY (store_id, message_id)
) WITH (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.01,
        autovacuum_vacuum_insert_scale_factor = 0.01);
CREATE INDEX fifo_messages_group ON queue_data.fifo_messages (store_id, message_group_id, message_id);
COMMENT ON TABLE queue_data.fifo_messages IS 'messages of the shared FIFO queues';

CREATE TABLE queue_data.groups (
	message_group_id text COLLATE "C" NOT NULL,
	head_seq bigint,
	available_at timestamptz,
	leased_upto bigint,
	store_id bigint NOT NULL,
	CONSTRAINT groups_pkey PRIMARY KEY (store_id, message_group_id)
) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01);
CREATE INDEX groups_head ON queue_data.groups (store_id, head_seq);
COMMENT ON TABLE queue_data.groups IS 'message groups of the shared FIFO queues';

CREATE TABLE queue_data.dedup_ids (
	scope_key text COLLATE "C" NOT NULL,
	deduplication_id text COLLATE "C" NOT NULL,
	message_id bigint NOT NULL,
	accepted_at timestamptz NOT NULL,
	queue_id bigint NOT NULL,
	CONSTRAINT dedup_ids_pkey PRIMARY KEY (queue_id, scope_key, deduplication_id)
) WITH (autovacuum_vacuum_scale_factor = 0.01);
CREATE INDEX dedup_ids_accepted ON queue_data.dedup_ids (queue_id, accepted_at);
COMMENT ON TABLE queue_data.dedup_ids IS 'deduplication ids of the shared queues';

CREATE TABLE queue_data.receive_attempts (
	receive_attempt_id text NOT NULL,
	received_at timestamptz NOT NULL,
	nonce bigint NOT NULL,
	message_ids bigint[] NOT NULL,
	visible_ats timestamptz[] NOT NULL,
	queue_id bigint NOT NULL,
	CONSTRAINT receive_attempts_pkey PRIMARY KEY (queue_id, receive_attempt_id)
);
CREATE INDEX receive_attempts_received ON queue_data.receive_attempts (queue_id, received_at);
COMMENT ON TABLE queue_data.receive_attempts IS 'receive attempts of the shared queues';

/*
 * Rows of dropped and purged shared queues, for the worker to delete in
 * bounded batches (queue._reclaim_step): the store of a purged queue, or
 * the store and queue id of a dropped one.
 */
CREATE TABLE @extschema@._reclaim (
	store_id bigint NOT NULL,
	queue_id bigint,
	fifo boolean NOT NULL,
	queued_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE @extschema@._reclaim IS 'shared rows of dropped and purged queues, left for the worker';

/* Only the rows of live shared queues are dumped. */
SELECT pg_catalog.pg_extension_config_dump('queue_data.messages',
	'WHERE store_id IN (SELECT coalesce(r.store_id, r.queue_id) FROM queue._queues r WHERE NOT r.dedicated AND NOT r.fifo)');
SELECT pg_catalog.pg_extension_config_dump('queue_data.fifo_messages',
	'WHERE store_id IN (SELECT coalesce(r.store_id, r.queue_id) FROM queue._queues r WHERE NOT r.dedicated AND r.fifo)');
SELECT pg_catalog.pg_extension_config_dump('queue_data.groups',
	'WHERE store_id IN (SELECT coalesce(r.store_id, r.queue_id) FROM queue._queues r WHERE NOT r.dedicated AND r.fifo)');
SELECT pg_catalog.pg_extension_config_dump('queue_data.dedup_ids',
	'WHERE queue_id IN (SELECT r.queue_id FROM queue._queues r WHERE NOT r.dedicated)');
SELECT pg_catalog.pg_extension_config_dump('queue_data.receive_attempts',
	'WHERE queue_id IN (SELECT r.queue_id FROM queue._queues r WHERE NOT r.dedicated)');
SELECT pg_catalog.pg_extension_config_dump('@extschema@._reclaim', '');


/* ------------------------------------------------------------------------
 * Owners and grants of shared queues
 * ------------------------------------------------------------------------
 */
CREATE FUNCTION @extschema@._holds_shared(role oid, owner regrole, grantees regrole[])
	RETURNS boolean LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'queue_holds_shared_sql';
REVOKE ALL ON FUNCTION @extschema@._holds_shared(oid, regrole, regrole[]) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._holds_shared(oid, regrole, regrole[]) IS 'whether role is a superuser, has the privileges of owner, or of one of grantees (''-'': PUBLIC)';

CREATE OR REPLACE FUNCTION @extschema@._may(q @extschema@._queues, caller oid, privilege text)
	RETURNS boolean LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp AS $$
	SELECT CASE WHEN q.dedicated THEN @extschema@._holds(q.queue_id, caller, privilege)
		ELSE @extschema@._holds_shared(caller, q.owner,
			CASE privilege WHEN 'send' THEN q.send_roles WHEN 'receive' THEN q.receive_roles
				ELSE q.manage_roles END) END
$$;

CREATE TABLE @extschema@._queue_roles ();
REVOKE ALL ON @extschema@._queue_roles FROM PUBLIC;
COMMENT ON TABLE @extschema@._queue_roles IS 'always empty: the owners and grantees of shared queues hold SELECT on it, so PostgreSQL refuses to drop them';

CREATE OR REPLACE FUNCTION @extschema@._sync_owner_ref(role oid, what text)
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	tbl regclass;
	fresh boolean;
	owns boolean;
	holds boolean;
BEGIN
	IF role = 0 OR NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.oid = role) THEN
		RETURN;					/* PUBLIC, or dropped before: nothing to protect */
	END IF;
	LOCK TABLE @extschema@._consumer_owners, @extschema@._subscription_owners,
		@extschema@._access_key_owners, @extschema@._queue_roles IN SHARE ROW EXCLUSIVE MODE;
	/* Only READ COMMITTED reads below with a snapshot taken after the lock. */
	fresh := pg_catalog.current_setting('transaction_isolation') = 'read committed';
	IF what = 'consumer' THEN
		tbl := '@extschema@._consumer_owners'::pg_catalog.regclass;
		owns := EXISTS (SELECT FROM @extschema@._consumers c WHERE c.owner::oid = role);
	ELSIF what = 'subscription' THEN
		tbl := '@extschema@._subscription_owners'::pg_catalog.regclass;
		owns := EXISTS (SELECT FROM @extschema@._subscriptions s WHERE s.owner::oid = role);
	ELSIF what = 'access_key' THEN
		tbl := '@extschema@._access_key_owners'::pg_catalog.regclass;
		owns := EXISTS (SELECT FROM @extschema@._access_keys k WHERE k.role::oid = role);
	ELSIF what = 'queue' THEN
		tbl := '@extschema@._queue_roles'::pg_catalog.regclass;
		owns := EXISTS (SELECT FROM @extschema@._queues q WHERE NOT q.dedicated
						AND (q.owner::oid = role OR role::regrole = ANY (q.send_roles)
							 OR role::regrole = ANY (q.receive_roles)
							 OR role::regrole = ANY (q.manage_roles)));
	ELSE
		RAISE EXCEPTION 'unknown owner reference "%"', what USING ERRCODE = 'XX000';
	END IF;
	/*
	 * The tables' owner (who owns the extension's objects, and so cannot be
	 * dropped anyway) keeps its own privileges: a revoke would take its
	 * SELECT away.
	 */
	IF EXISTS (SELECT FROM pg_catalog.pg_class k WHERE k.oid = tbl AND k.relowner = role) THEN
		RETURN;
	END IF;
	holds := EXISTS (SELECT FROM pg_catalog.pg_class k, pg_catalog.aclexplode(k.relacl) x
					 WHERE k.oid = tbl AND x.grantee = role AND x.privilege_type = 'SELECT');
	IF owns AND NOT (fresh AND holds) THEN
		PERFORM @extschema@._owner_ref_acl(role, what, true);
	ELSIF NOT owns AND fresh AND holds THEN
		PERFORM @extschema@._owner_ref_acl(role, what, false);
	END IF;
END
$$;

/*
 * The roles a shared queue's row names.  A role that already holds its
 * SELECT and gains a queue needs nothing: that is every create but a
 * role's first, which then takes no lock.
 */
CREATE FUNCTION @extschema@._queue_roles_of(q @extschema@._queues)
	RETURNS SETOF oid LANGUAGE sql IMMUTABLE
	SET search_path = pg_catalog, pg_temp AS $$
	SELECT DISTINCT r::oid FROM unnest(ARRAY[q.owner] || coalesce(q.send_roles, '{}')
		|| coalesce(q.receive_roles, '{}') || coalesce(q.manage_roles, '{}')) r
	WHERE NOT q.dedicated AND r IS NOT NULL AND r::oid <> 0
$$;

CREATE FUNCTION @extschema@._queue_roles_trigger()
	RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	role oid;
BEGIN
	IF TG_OP IN ('INSERT', 'UPDATE') THEN
		FOR role IN SELECT @extschema@._queue_roles_of(NEW) LOOP
			IF NOT EXISTS (SELECT FROM pg_catalog.pg_class k, pg_catalog.aclexplode(k.relacl) x
						   WHERE k.oid = '@extschema@._queue_roles'::pg_catalog.regclass
							 AND x.grantee = role AND x.privilege_type = 'SELECT') THEN
				PERFORM @extschema@._sync_owner_ref(role, 'queue');
			END IF;
		END LOOP;
	END IF;
	IF TG_OP IN ('DELETE', 'UPDATE') THEN
		FOR role IN SELECT @extschema@._queue_roles_of(OLD)
					EXCEPT SELECT @extschema@._queue_roles_of(NEW) WHERE TG_OP = 'UPDATE' LOOP
			PERFORM @extschema@._sync_owner_ref(role, 'queue');
		END LOOP;
	END IF;
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION @extschema@._queue_roles_trigger() IS 'keep the grants on queue._queue_roles in step with the owners and grantees of shared queues';
CREATE TRIGGER queue_roles AFTER INSERT OR DELETE
	OR UPDATE OF dedicated, owner, send_roles, receive_roles, manage_roles
	ON @extschema@._queues FOR EACH ROW EXECUTE FUNCTION @extschema@._queue_roles_trigger();

CREATE OR REPLACE FUNCTION @extschema@._drop_owned_refs(roles oid[])
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	s record;
	topic regclass;
	q @extschema@._queues;
BEGIN
	FOR s IN DELETE FROM @extschema@._subscriptions r WHERE r.owner::oid = ANY (roles)
			 RETURNING r.topic_id, r.subscription_id LOOP
		PERFORM @extschema@._topic_counter_reset(s.topic_id, s.subscription_id, true);
		topic := pg_catalog.to_regclass(pg_catalog.format('queue_data.t%s', s.topic_id));
		IF topic IS NOT NULL THEN
			PERFORM @extschema@._invalidate(topic);
		END IF;
	END LOOP;
	DELETE FROM @extschema@._consumers r WHERE r.owner::oid = ANY (roles);
	IF FOUND THEN
		PERFORM @extschema@._invalidate('@extschema@._consumers'::pg_catalog.regclass);
	END IF;
	DELETE FROM @extschema@._access_keys k WHERE k.role::oid = ANY (roles);
	/* Shared queues, as DROP OWNED drops a dedicated queue's table. */
	FOR q IN SELECT * FROM @extschema@._queues r
			 WHERE NOT r.dedicated AND r.owner::oid = ANY (roles) LOOP
		PERFORM @extschema@._drop_shared(q, true);
	END LOOP;
	UPDATE @extschema@._queues r SET
		send_roles = ARRAY(SELECT x FROM unnest(r.send_roles) x WHERE x::oid <> ALL (roles)),
		receive_roles = ARRAY(SELECT x FROM unnest(r.receive_roles) x WHERE x::oid <> ALL (roles)),
		manage_roles = ARRAY(SELECT x FROM unnest(r.manage_roles) x WHERE x::oid <> ALL (roles))
	WHERE NOT r.dedicated AND (r.send_roles::oid[] && roles OR r.receive_roles::oid[] && roles
							   OR r.manage_roles::oid[] && roles);
	IF FOUND THEN
		PERFORM @extschema@._invalidate_shared();
	END IF;
END
$$;

CREATE OR REPLACE FUNCTION @extschema@._reassign_owned_refs(roles oid[], new_owner oid)
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	s record;
	topic regclass;
BEGIN
	FOR s IN UPDATE @extschema@._subscriptions r SET owner = new_owner::pg_catalog.regrole
			 WHERE r.owner::oid = ANY (roles) AND r.owner::oid <> new_owner
			 RETURNING r.topic_id LOOP
		topic := pg_catalog.to_regclass(pg_catalog.format('queue_data.t%s', s.topic_id));
		IF topic IS NOT NULL THEN
			PERFORM @extschema@._invalidate(topic);
		END IF;
	END LOOP;
	UPDATE @extschema@._consumers r SET owner = new_owner::pg_catalog.regrole
	WHERE r.owner::oid = ANY (roles) AND r.owner::oid <> new_owner;
	IF FOUND THEN
		PERFORM @extschema@._invalidate('@extschema@._consumers'::pg_catalog.regclass);
	END IF;
	/* A credential is not reassigned (see above); the new owner's own keys stay. */
	DELETE FROM @extschema@._access_keys k WHERE k.role::oid = ANY (roles) AND k.role::oid <> new_owner;
	UPDATE @extschema@._queues r SET owner = new_owner::pg_catalog.regrole
	WHERE NOT r.dedicated AND r.owner::oid = ANY (roles) AND r.owner::oid <> new_owner;
	IF FOUND THEN
		PERFORM @extschema@._invalidate_shared();
	END IF;
END
$$;


/* ------------------------------------------------------------------------
 * Invalidation: a shared queue has no table of its own to invalidate, so
 * a change to one makes every backend reload its shared queues (catalog.c
 * keys them to the shared message tables).
 * ------------------------------------------------------------------------
 */
CREATE FUNCTION @extschema@._invalidate_shared()
	RETURNS void LANGUAGE sql
	SET search_path = pg_catalog, pg_temp AS $$
	SELECT @extschema@._invalidate('queue_data.messages'::pg_catalog.regclass);
	SELECT @extschema@._invalidate('queue_data.fifo_messages'::pg_catalog.regclass);
$$;

CREATE FUNCTION @extschema@._invalidate_queue(queue_id bigint)
	RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	tbl regclass := pg_catalog.to_regclass(pg_catalog.format('queue_data.q%s', queue_id));
BEGIN
	IF tbl IS NOT NULL THEN
		PERFORM @extschema@._invalidate(tbl);
	ELSE
		PERFORM @extschema@._invalidate_shared();
	END IF;
END
$$;

/* 1.1's body, with the invalidation of either layout. */
CREATE OR REPLACE FUNCTION @extschema@._alter_attributes(
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
	PERFORM @extschema@._invalidate_queue(q.queue_id);
END
$$;


/* ------------------------------------------------------------------------
 * create, alter (and the move between layouts), drop, purge, grant
 * ------------------------------------------------------------------------
 */
DROP FUNCTION @extschema@.create(text, boolean, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], interval, jsonb);
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
	retry_delay interval DEFAULT '0',
	tags jsonb DEFAULT '{}',
	/* false, unless the setting queue.default_storage says dedicated */
	dedicated boolean DEFAULT coalesce(
		pg_catalog.current_setting('queue.default_storage', true) = 'dedicated', false))
	RETURNS bigint
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
COMMENT ON FUNCTION @extschema@.create(text, boolean, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], interval, jsonb, boolean)
	IS 'create a queue (or return the id of an identical one): rows in the shared tables, or tables of its own with dedicated => true';

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
	retry_delay interval,
	tags jsonb,
	dedicated boolean,
	caller oid)
	RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	q @extschema@._queues;
	old @extschema@._queues;
BEGIN
	IF dedicated IS NULL THEN
		RAISE EXCEPTION 'argument "dedicated" must not be null' USING ERRCODE = '22004';
	END IF;
	IF dedicated THEN
		/* 1.3's: tables of its own; an existing queue of either layout is found there too */
		RETURN @extschema@._create(queue_name, fifo, visibility_timeout, delay, retention,
			max_message_size, receive_wait, content_based_deduplication, deduplication_window,
			deduplication_scope, dead_letter_queue, max_receive_count, redrive_allow,
			retry_delay, tags, caller);
	END IF;
	/* The checks of the dedicated path, in its order. */
	PERFORM @extschema@._check_retry_delay(retry_delay);
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
		/* The layout is not an attribute: either one is the same queue. */
		IF (old.fifo, old.visibility_timeout, old.delay, old.retention, old.max_message_size,
			old.receive_wait, old.content_based_deduplication, old.deduplication_window,
			old.deduplication_scope, old.dead_letter_queue, old.max_receive_count,
			old.redrive_allow, old.tags, old.retry_delay)
			IS NOT DISTINCT FROM
		   (q.fifo, q.visibility_timeout, q.delay, q.retention, q.max_message_size,
			q.receive_wait, q.content_based_deduplication, q.deduplication_window,
			q.deduplication_scope, q.dead_letter_queue, q.max_receive_count,
			q.redrive_allow, q.tags, retry_delay) THEN
			RETURN old.queue_id;
		END IF;
		RAISE EXCEPTION 'queue "%" already exists with other attributes', queue_name
			USING ERRCODE = '42710',
			HINT = 'Use queue.alter to change its attributes.';
	END IF;

	INSERT INTO @extschema@._queues AS r (queue_name, fifo, visibility_timeout, delay, retention,
		max_message_size, receive_wait, content_based_deduplication, deduplication_window,
		deduplication_scope, dead_letter_queue, max_receive_count, redrive_allow, tags,
		retry_delay, dedicated, owner)
	VALUES (q.queue_name, q.fifo, q.visibility_timeout, q.delay, q.retention,
		q.max_message_size, q.receive_wait, q.content_based_deduplication, q.deduplication_window,
		q.deduplication_scope, q.dead_letter_queue, q.max_receive_count, q.redrive_allow, q.tags,
		retry_delay, false, caller::regrole)
	RETURNING r.queue_id INTO q.queue_id;
	PERFORM @extschema@._reset_counters(q.queue_id, false);
	/*
	 * No invalidation: the worker lists the queues again within 10 s
	 * anyway (worker.c), and a new queue has nothing to sweep before then;
	 * sending one per create would have every backend rebuild its entry of
	 * the registry, and the worker list every queue, at each create.
	 */
	RETURN q.queue_id;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._create(text, boolean, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], interval, jsonb, boolean, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._create(text, boolean, interval, interval, interval, integer,
	interval, boolean, interval, text, text, integer, text[], interval, jsonb, boolean, oid)
	IS 'queue.create as the tables'' owner, for caller';

DROP FUNCTION @extschema@.alter(text, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], interval, jsonb);
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
	retry_delay interval DEFAULT NULL,
	tags jsonb DEFAULT NULL,
	dedicated boolean DEFAULT NULL)
	RETURNS void
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
COMMENT ON FUNCTION @extschema@.alter(text, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], interval, jsonb, boolean)
	IS 'change a queue''s attributes (null: unchanged); dedicated moves it between the layouts with all its state';

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
	retry_delay interval,
	tags jsonb,
	dedicated boolean,
	caller oid)
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
BEGIN
	/* 1.3's: checks manage, changes and invalidates the attributes */
	PERFORM @extschema@._alter(queue_name, visibility_timeout, delay, retention,
		max_message_size, receive_wait, content_based_deduplication, deduplication_window,
		deduplication_scope, dead_letter_queue, max_receive_count, redrive_allow,
		retry_delay, tags, caller);
	IF dedicated IS NOT NULL THEN
		PERFORM @extschema@._move(queue_name, dedicated);
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._alter(text, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], interval, jsonb, boolean, oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._alter(text, interval, interval, interval, integer, interval,
	boolean, interval, text, text, integer, text[], interval, jsonb, boolean, oid)
	IS 'queue.alter as the tables'' owner, for caller';

/* Take the lock every API call on the queue takes (catalog.c), exclusively. */
CREATE FUNCTION @extschema@._lock_queue(queue_id bigint)
	RETURNS void LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'queue_lock_queue_sql';
REVOKE ALL ON FUNCTION @extschema@._lock_queue(bigint) FROM PUBLIC;

/*
 * Move a queue between the layouts with every row it has: messages with
 * their receipts, leases and counts, FIFO groups, deduplication ids and
 * receive attempts.  Every API call and sweep of the queue waits while it
 * moves (the queue's lock; a dedicated queue's tables are locked too);
 * other queues never do.  The rows left in the shared tables go to the
 * worker, under a store id no queue uses any more.
 */
CREATE FUNCTION @extschema@._move(queue_name text, to_dedicated boolean)
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	q @extschema@._queues;
	store bigint;
	msgs text;
	g record;
BEGIN
	q := @extschema@._lookup(queue_name, true);
	IF q.dedicated = to_dedicated THEN
		RETURN;
	END IF;
	PERFORM @extschema@._lock_queue(q.queue_id);
	msgs := CASE WHEN q.fifo THEN 'queue_data.fifo_messages' ELSE 'queue_data.messages' END;
	IF to_dedicated THEN
		store := coalesce(q.store_id, q.queue_id);
		/* Tables of its own, made as 1.3 makes them, then filled. */
		PERFORM @extschema@._create_tables(q.queue_id, q.fifo, q.owner::oid);
		EXECUTE pg_catalog.format('INSERT INTO queue_data.q%s SELECT message_id, visible_at, sent_at,'
			' receipt, sequence_number, first_received_at, receive_count, message_group_id,'
			' deduplication_id, attributes, source_queue_id, body FROM %s WHERE store_id = $1'
			' ORDER BY message_id', q.queue_id, msgs) USING store;
		IF q.fifo THEN
			EXECUTE pg_catalog.format('INSERT INTO queue_data.g%s SELECT message_group_id,'
				' head_seq, available_at, leased_upto FROM queue_data.groups WHERE store_id = $1',
				q.queue_id) USING store;
		END IF;
		EXECUTE pg_catalog.format('INSERT INTO queue_data.d%s SELECT scope_key, deduplication_id,'
			' message_id, accepted_at FROM queue_data.dedup_ids WHERE queue_id = $1', q.queue_id)
			USING q.queue_id;
		EXECUTE pg_catalog.format('INSERT INTO queue_data.a%s SELECT receive_attempt_id,'
			' received_at, nonce, message_ids, visible_ats FROM queue_data.receive_attempts'
			' WHERE queue_id = $1', q.queue_id) USING q.queue_id;
		DELETE FROM queue_data.dedup_ids d WHERE d.queue_id = q.queue_id;
		DELETE FROM queue_data.receive_attempts a WHERE a.queue_id = q.queue_id;
		INSERT INTO @extschema@._reclaim (store_id, queue_id, fifo) VALUES (store, NULL, q.fifo);
		/* Its grants become the table's. */
		FOR g IN SELECT p.priv, x AS role FROM (VALUES ('INSERT', q.send_roles),
				('UPDATE', q.receive_roles), ('TRUNCATE', q.manage_roles)) p(priv, roles),
				unnest(p.roles) x LOOP
			EXECUTE pg_catalog.format('GRANT %s ON TABLE queue_data.q%s TO %s', g.priv, q.queue_id,
				/* regrole's text is the name already quoted as an identifier */
				CASE WHEN g.role::oid = 0 THEN 'PUBLIC' ELSE g.role::text END);
		END LOOP;
		UPDATE @extschema@._queues r SET dedicated = true, store_id = NULL, owner = NULL,
			send_roles = NULL, receive_roles = NULL, manage_roles = NULL
		WHERE r.queue_id = q.queue_id;
		PERFORM @extschema@._invalidate_shared();
	ELSE
		/* A store id no rows have: the queue's own may have some left from before. */
		store := pg_catalog.nextval(pg_catalog.pg_get_serial_sequence('@extschema@._queues', 'queue_id'));
		EXECUTE pg_catalog.format('LOCK TABLE queue_data.q%s IN ACCESS EXCLUSIVE MODE', q.queue_id);
		EXECUTE pg_catalog.format('INSERT INTO %s (message_id, visible_at, sent_at, receipt,'
			' sequence_number, first_received_at, receive_count, message_group_id,'
			' deduplication_id, attributes, source_queue_id, body, store_id)'
			' SELECT message_id, visible_at, sent_at, receipt, sequence_number, first_received_at,'
			' receive_count, message_group_id, deduplication_id, attributes, source_queue_id,'
			' body, $1 FROM queue_data.q%s ORDER BY message_id', msgs, q.queue_id) USING store;
		IF q.fifo THEN
			EXECUTE pg_catalog.format('INSERT INTO queue_data.groups (message_group_id, head_seq,'
				' available_at, leased_upto, store_id) SELECT message_group_id, head_seq,'
				' available_at, leased_upto, $1 FROM queue_data.g%s', q.queue_id) USING store;
		END IF;
		EXECUTE pg_catalog.format('INSERT INTO queue_data.dedup_ids (scope_key, deduplication_id,'
			' message_id, accepted_at, queue_id) SELECT scope_key, deduplication_id, message_id,'
			' accepted_at, $1 FROM queue_data.d%s', q.queue_id) USING q.queue_id;
		EXECUTE pg_catalog.format('INSERT INTO queue_data.receive_attempts (receive_attempt_id,'
			' received_at, nonce, message_ids, visible_ats, queue_id) SELECT receive_attempt_id,'
			' received_at, nonce, message_ids, visible_ats, $1 FROM queue_data.a%s', q.queue_id)
			USING q.queue_id;
		/* Owner and grants, from the table's. */
		UPDATE @extschema@._queues r SET dedicated = false, store_id = store,
			owner = c.relowner::regrole,
			send_roles = ARRAY(SELECT x.grantee::regrole FROM pg_catalog.aclexplode(c.relacl) x
							   WHERE x.privilege_type = 'INSERT' AND x.grantee <> c.relowner),
			receive_roles = ARRAY(SELECT x.grantee::regrole FROM pg_catalog.aclexplode(c.relacl) x
								  WHERE x.privilege_type = 'UPDATE' AND x.grantee <> c.relowner),
			manage_roles = ARRAY(SELECT x.grantee::regrole FROM pg_catalog.aclexplode(c.relacl) x
								 WHERE x.privilege_type = 'TRUNCATE' AND x.grantee <> c.relowner)
		FROM pg_catalog.pg_class c
		WHERE r.queue_id = q.queue_id AND c.oid = pg_catalog.format('queue_data.q%s', q.queue_id)::regclass;
		/* The row says shared first: the sql_drop trigger leaves it alone. */
		EXECUTE pg_catalog.format('DROP TABLE queue_data.q%1$s, queue_data.d%1$s, queue_data.a%1$s',
			q.queue_id);
		IF q.fifo THEN
			EXECUTE pg_catalog.format('DROP TABLE queue_data.g%s', q.queue_id);
		END IF;
		PERFORM @extschema@._invalidate_shared();
	END IF;
	/* Its sources' dead-letter moves name its table. */
	PERFORM @extschema@._invalidate_queue(r.queue_id)
	FROM @extschema@._queues r WHERE r.dead_letter_queue = q.queue_id;
	PERFORM @extschema@._invalidate('@extschema@._queues'::regclass);
END
$$;
REVOKE ALL ON FUNCTION @extschema@._move(text, boolean) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._move(text, boolean) IS 'move a queue between the shared and the dedicated layout with all its rows';

/* The tables of a dedicated queue, as 1.1's _create makes them. */
CREATE FUNCTION @extschema@._create_tables(queue_id bigint, fifo boolean, owner oid)
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	tbl text := pg_catalog.format('queue_data.q%s', queue_id);
BEGIN
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
		        autovacuum_vacuum_insert_scale_factor = 0.01)$ddl$, tbl, queue_id);
	IF NOT fifo THEN
		EXECUTE pg_catalog.format('CREATE INDEX q%1$s_visible ON %2$s (visible_at, message_id)',
			queue_id, tbl);
	END IF;
	EXECUTE pg_catalog.format('COMMENT ON TABLE %s IS %L', tbl, 'messages of queue id ' || queue_id);
	EXECUTE pg_catalog.format($ddl$
		CREATE TABLE queue_data.d%1$s (
			scope_key text COLLATE "C" NOT NULL,
			deduplication_id text COLLATE "C" NOT NULL,
			message_id bigint NOT NULL,
			accepted_at timestamptz NOT NULL,
			CONSTRAINT d%1$s_pkey PRIMARY KEY (scope_key, deduplication_id)
		) WITH (autovacuum_vacuum_scale_factor = 0.01)$ddl$, queue_id);
	EXECUTE pg_catalog.format('CREATE INDEX d%1$s_accepted ON queue_data.d%1$s (accepted_at)', queue_id);
	EXECUTE pg_catalog.format('COMMENT ON TABLE queue_data.d%1$s IS %L', queue_id,
		'deduplication ids of queue id ' || queue_id);
	EXECUTE pg_catalog.format($ddl$
		CREATE TABLE queue_data.a%1$s (
			receive_attempt_id text NOT NULL,
			received_at timestamptz NOT NULL,
			nonce bigint NOT NULL,
			message_ids bigint[] NOT NULL,
			visible_ats timestamptz[] NOT NULL,
			CONSTRAINT a%1$s_pkey PRIMARY KEY (receive_attempt_id)
		)$ddl$, queue_id);
	EXECUTE pg_catalog.format('COMMENT ON TABLE queue_data.a%1$s IS %L', queue_id,
		'receive attempts of queue id ' || queue_id);
	IF fifo THEN
		EXECUTE pg_catalog.format('CREATE INDEX q%1$s_group ON %2$s (message_group_id, message_id)',
			queue_id, tbl);
		EXECUTE pg_catalog.format($ddl$
			CREATE TABLE queue_data.g%1$s (
				message_group_id text COLLATE "C" NOT NULL,
				head_seq bigint,
				available_at timestamptz,
				leased_upto bigint,
				CONSTRAINT g%1$s_pkey PRIMARY KEY (message_group_id)
			) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0.01)$ddl$, queue_id);
		EXECUTE pg_catalog.format('CREATE INDEX g%1$s_head ON queue_data.g%1$s (head_seq)', queue_id);
		EXECUTE pg_catalog.format('COMMENT ON TABLE queue_data.g%1$s IS %L', queue_id,
			'message groups of FIFO queue id ' || queue_id);
	END IF;
	EXECUTE pg_catalog.format('ALTER TABLE %s OWNER TO %s', tbl, owner::regrole);
END
$$;
REVOKE ALL ON FUNCTION @extschema@._create_tables(bigint, boolean, oid) FROM PUBLIC;

/*
 * Drop of a shared queue: the row goes, and its rows go to the worker.
 * Sources that name it lose their dead-letter queue, as drop's force does.
 */
CREATE FUNCTION @extschema@._drop_shared(q @extschema@._queues, force boolean)
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	PERFORM @extschema@._lock_queue(q.queue_id);
	PERFORM @extschema@._invalidate_queue(r.queue_id)
	FROM @extschema@._queues r WHERE r.dead_letter_queue = q.queue_id;
	UPDATE @extschema@._queues r SET dead_letter_queue = NULL, max_receive_count = NULL
	WHERE r.dead_letter_queue = q.queue_id;
	DELETE FROM @extschema@._queues r WHERE r.queue_id = q.queue_id;
	INSERT INTO @extschema@._reclaim (store_id, queue_id, fifo)
	VALUES (coalesce(q.store_id, q.queue_id), q.queue_id, q.fifo);
	PERFORM @extschema@._reset_counters(q.queue_id, true);
	PERFORM @extschema@._invalidate_shared();
	PERFORM @extschema@._invalidate('@extschema@._queues'::regclass);
END
$$;
REVOKE ALL ON FUNCTION @extschema@._drop_shared(@extschema@._queues, boolean) FROM PUBLIC;

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
	END IF;
	IF NOT q.dedicated THEN
		PERFORM @extschema@._drop_shared(q, force);
		RETURN true;
	END IF;
	/* Forced: the sources lose their dead-letter queue. */
	PERFORM @extschema@._invalidate_queue(r.queue_id)
	FROM @extschema@._queues r WHERE r.dead_letter_queue = q.queue_id;
	UPDATE @extschema@._queues r SET dead_letter_queue = NULL, max_receive_count = NULL
	WHERE r.dead_letter_queue = q.queue_id;
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

/*
 * Purge of a shared queue: its messages and groups are left under their
 * store id for the worker, and the queue takes a new one, so it is empty
 * at once whatever it held.  A FIFO queue's lock waits for the sends in
 * progress (they hold it), as the lock of g<id> does on a dedicated one.
 */
CREATE OR REPLACE FUNCTION @extschema@._purge(queue_name text,
	caller oid)
	RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	q @extschema@._queues;
	n bigint;
	store bigint;
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
	IF NOT q.dedicated THEN
		/* (first: in a read-only transaction, the error of the dedicated path) */
		DELETE FROM queue_data.receive_attempts a WHERE a.queue_id = q.queue_id;
		PERFORM @extschema@._lock_queue(q.queue_id);
		store := coalesce(q.store_id, q.queue_id);
		IF q.fifo THEN
			SELECT count(*) INTO n FROM queue_data.fifo_messages m WHERE m.store_id = store;
		ELSE
			SELECT count(*) INTO n FROM queue_data.messages m WHERE m.store_id = store;
		END IF;
		INSERT INTO @extschema@._reclaim (store_id, queue_id, fifo) VALUES (store, NULL, q.fifo);
		UPDATE @extschema@._queues r
		SET store_id = pg_catalog.nextval(pg_catalog.pg_get_serial_sequence('@extschema@._queues', 'queue_id'))
		WHERE r.queue_id = q.queue_id;
		PERFORM @extschema@._invalidate_shared();
		RETURN n;
	END IF;
	IF q.fifo THEN
		/*
		 * Every FIFO send looks its groups up in g<id> (and holds that
		 * lock to commit) before it inserts a message.  ACCESS EXCLUSIVE
		 * waits for sends already past that point, whose messages the
		 * DELETE below then sees and removes, and holds later sends back
		 * until we commit, when they find their groups gone and make new
		 * rows.
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
 * The worker's share of drops and purges: delete at most batch rows of
 * one reclaimed store (messages, then groups, deduplication ids and
 * receive attempts of a dropped queue), and forget the store once nothing
 * of it is left.  Returns the rows deleted.
 */
CREATE FUNCTION @extschema@._reclaim_step(batch integer)
	RETURNS bigint LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	r record;
	n bigint := 0;
	k bigint;
BEGIN
	SELECT c.ctid, c.* INTO r FROM @extschema@._reclaim c
	ORDER BY c.queued_at LIMIT 1 FOR UPDATE SKIP LOCKED;
	IF NOT FOUND THEN
		RETURN 0;
	END IF;
	IF r.fifo THEN
		DELETE FROM queue_data.fifo_messages m WHERE m.store_id = r.store_id
		AND m.message_id = ANY (ARRAY(SELECT x.message_id FROM queue_data.fifo_messages x
									  WHERE x.store_id = r.store_id ORDER BY x.message_id LIMIT batch));
		GET DIAGNOSTICS k = ROW_COUNT;
		n := n + k;
		IF n < batch THEN
			DELETE FROM queue_data.groups g WHERE g.store_id = r.store_id
			AND g.message_group_id = ANY (ARRAY(SELECT x.message_group_id FROM queue_data.groups x
												WHERE x.store_id = r.store_id LIMIT batch - n));
			GET DIAGNOSTICS k = ROW_COUNT;
			n := n + k;
		END IF;
	ELSE
		DELETE FROM queue_data.messages m WHERE m.store_id = r.store_id
		AND m.message_id = ANY (ARRAY(SELECT x.message_id FROM queue_data.messages x
									  WHERE x.store_id = r.store_id ORDER BY x.message_id LIMIT batch));
		GET DIAGNOSTICS k = ROW_COUNT;
		n := n + k;
	END IF;
	IF n < batch AND r.queue_id IS NOT NULL THEN
		DELETE FROM queue_data.dedup_ids d WHERE d.queue_id = r.queue_id
		AND (d.scope_key, d.deduplication_id) IN (SELECT x.scope_key, x.deduplication_id
			FROM queue_data.dedup_ids x WHERE x.queue_id = r.queue_id LIMIT batch - n);
		GET DIAGNOSTICS k = ROW_COUNT;
		n := n + k;
		IF n < batch THEN
			DELETE FROM queue_data.receive_attempts a WHERE a.queue_id = r.queue_id;
			GET DIAGNOSTICS k = ROW_COUNT;
			n := n + k;
		END IF;
	END IF;
	IF n < batch THEN
		DELETE FROM @extschema@._reclaim c WHERE c.ctid = r.ctid;
	END IF;
	RETURN n;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._reclaim_step(integer) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._reclaim_step(integer) IS 'worker: delete at most batch rows of a dropped or purged shared queue';

CREATE OR REPLACE FUNCTION @extschema@._grant_revoke(queue_name text, role_name text, privileges text[],
	is_grant boolean, caller oid)
	RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	q @extschema@._queues;
	g record;
	tbl regclass;
	modes text;
	role regrole;
BEGIN
	q := @extschema@._lookup(queue_name, true);
	PERFORM @extschema@._check_manage(q, caller);
	g := @extschema@._grantee(role_name);
	PERFORM @extschema@._check_privileges(privileges, '{send, receive, manage}', '');
	IF NOT q.dedicated THEN
		/* The owner's privileges are not in the grants' hands. */
		IF g.rname IS NOT NULL AND q.owner::oid = (SELECT r.oid FROM pg_catalog.pg_roles r
												  WHERE r.rolname = g.rname) THEN
			RETURN;
		END IF;
		role := CASE WHEN g.rname IS NULL THEN '-'::regrole
				ELSE (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = g.rname)::regrole END;
		UPDATE @extschema@._queues r SET
			send_roles = CASE WHEN 'send' = ANY (privileges) THEN
				ARRAY(SELECT DISTINCT x FROM unnest(coalesce(r.send_roles, '{}') || CASE WHEN is_grant THEN ARRAY[role] ELSE '{}' END) x
					  WHERE is_grant OR x <> role ORDER BY 1) ELSE r.send_roles END,
			receive_roles = CASE WHEN 'receive' = ANY (privileges) THEN
				ARRAY(SELECT DISTINCT x FROM unnest(coalesce(r.receive_roles, '{}') || CASE WHEN is_grant THEN ARRAY[role] ELSE '{}' END) x
					  WHERE is_grant OR x <> role ORDER BY 1) ELSE r.receive_roles END,
			manage_roles = CASE WHEN 'manage' = ANY (privileges) THEN
				ARRAY(SELECT DISTINCT x FROM unnest(coalesce(r.manage_roles, '{}') || CASE WHEN is_grant THEN ARRAY[role] ELSE '{}' END) x
					  WHERE is_grant OR x <> role ORDER BY 1) ELSE r.manage_roles END
		WHERE r.queue_id = q.queue_id;
		PERFORM @extschema@._invalidate_shared();
		RETURN;
	END IF;
	tbl := format('queue_data.q%s', q.queue_id)::regclass;
	/* The owner's privileges are not in the ACL's hands. */
	IF g.rname IS NOT NULL AND EXISTS (SELECT 1 FROM pg_catalog.pg_class c
									  JOIN pg_catalog.pg_roles r ON r.oid = c.relowner
									  WHERE c.oid = tbl AND r.rolname = g.rname) THEN
		RETURN;
	END IF;
	SELECT string_agg(DISTINCT CASE v WHEN 'send' THEN 'INSERT' WHEN 'receive' THEN 'UPDATE'
									 ELSE 'TRUNCATE' END, ', ')
	INTO modes FROM unnest(privileges) v;
	IF is_grant THEN
		EXECUTE format('GRANT %s ON TABLE %s TO %s', modes, tbl, g.grantee);
	ELSE
		EXECUTE format('REVOKE %s ON TABLE %s FROM %s', modes, tbl, g.grantee);
	END IF;
END
$$;


/* ------------------------------------------------------------------------
 * The views
 * ------------------------------------------------------------------------
 */
CREATE OR REPLACE VIEW @extschema@.queues WITH (security_barrier) AS
	SELECT r.queue_name, r.queue_id, r.fifo, r.visibility_timeout, r.delay, r.retention,
		   r.max_message_size, r.receive_wait, r.content_based_deduplication,
		   r.deduplication_window, r.deduplication_scope,
		   d.queue_name AS dead_letter_queue, r.max_receive_count, r.redrive_allow,
		   r.retry_delay, r.tags,
		   coalesce(r.owner, c.relowner::regrole) AS owner, r.created_at, r.dedicated
	FROM @extschema@._queues r
	LEFT JOIN pg_catalog.pg_class c
	  ON r.dedicated AND c.relnamespace = 'queue_data'::regnamespace AND c.relname = 'q' || r.queue_id
	LEFT JOIN @extschema@._queues d ON d.queue_id = r.dead_letter_queue
	WHERE @extschema@._may_see(r.queue_id);

/*
 * queue.stats's counts of a shared queue: 1.1's _depth over its rows of a
 * shared table (the estimate of a large queue samples the table, which
 * holds other queues too, so it scales by the queue's share of the index).
 */
CREATE FUNCTION @extschema@._depth_shared(store bigint, fifo boolean, retention interval,
	OUT visible bigint, OUT in_flight bigint, OUT delayed bigint,
	OUT oldest_sent_at timestamptz, OUT oldest_visible_age interval)
	LANGUAGE plpgsql SECURITY INVOKER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	now_ts timestamptz := pg_catalog.clock_timestamp();
BEGIN
	IF fifo THEN
		SELECT count(*) FILTER (WHERE m.visible_at <= now_ts),
			   count(*) FILTER (WHERE m.visible_at > now_ts AND m.receive_count > 0),
			   count(*) FILTER (WHERE m.visible_at > now_ts AND m.receive_count = 0),
			   min(m.sent_at)
		INTO visible, in_flight, delayed, oldest_sent_at
		FROM (SELECT * FROM queue_data.fifo_messages x WHERE x.store_id = store
			  AND x.sent_at > now_ts - retention ORDER BY x.message_id LIMIT 10001) m;
		SELECT now_ts - m.sent_at INTO oldest_visible_age FROM queue_data.fifo_messages m
		WHERE m.store_id = store AND m.visible_at <= now_ts AND m.sent_at > now_ts - retention
		ORDER BY m.message_id LIMIT 1;
	ELSE
		SELECT count(*) FILTER (WHERE m.visible_at <= now_ts),
			   count(*) FILTER (WHERE m.visible_at > now_ts AND m.receive_count > 0),
			   count(*) FILTER (WHERE m.visible_at > now_ts AND m.receive_count = 0),
			   min(m.sent_at)
		INTO visible, in_flight, delayed, oldest_sent_at
		FROM (SELECT * FROM queue_data.messages x WHERE x.store_id = store
			  AND x.sent_at > now_ts - retention ORDER BY x.message_id LIMIT 10001) m;
		SELECT now_ts - m.sent_at INTO oldest_visible_age FROM queue_data.messages m
		WHERE m.store_id = store AND m.visible_at <= now_ts AND m.sent_at > now_ts - retention
		ORDER BY m.visible_at, m.message_id LIMIT 1;
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._depth_shared(bigint, boolean, interval) FROM PUBLIC;

/* 1.1's trigger: a shared queue's tables are no one's but the worker's to drop. */
CREATE OR REPLACE FUNCTION @extschema@._forget_dropped()
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
		IF NOT EXISTS (SELECT 1 FROM @extschema@._queues r WHERE r.queue_id = id AND r.dedicated) THEN
			CONTINUE;			/* queue.drop, which deleted the row first, or a move to shared */
		END IF;
		/* Its sources lose their dead-letter queue, as with drop's force. */
		PERFORM @extschema@._invalidate_queue(r.queue_id)
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

/* The owner of a queue, in either layout. */
CREATE FUNCTION @extschema@._queue_owner(queue_id bigint)
	RETURNS oid LANGUAGE sql STABLE
	SET search_path = pg_catalog, pg_temp AS $$
	SELECT coalesce((SELECT r.owner::oid FROM @extschema@._queues r
					 WHERE r.queue_id = _queue_owner.queue_id AND NOT r.dedicated),
					(SELECT k.relowner FROM pg_catalog.pg_class k
					 WHERE k.oid = pg_catalog.to_regclass(pg_catalog.format('queue_data.q%s', _queue_owner.queue_id))))
$$;
REVOKE ALL ON FUNCTION @extschema@._queue_owner(bigint) FROM PUBLIC;

/* 1.3's, with the owner of a shared queue. */
CREATE OR REPLACE FUNCTION @extschema@._check_consumer_owner(c @extschema@._consumers, caller oid)
	RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF pg_catalog.pg_has_role(caller, c.owner::oid, 'USAGE')
	   OR pg_catalog.pg_has_role(caller, coalesce(@extschema@._queue_owner(c.queue_id), 0::oid), 'USAGE') THEN
		RETURN;
	END IF;
	RAISE EXCEPTION 'permission denied for consumer "%"', c.consumer_name
		USING ERRCODE = '42501',
		DETAIL = 'Only the role that created the consumer, the owner of its queue or a superuser may change it.';
END
$$;

/* None of the internal functions above is anyone's to call. */
REVOKE ALL ON FUNCTION @extschema@._invalidate_shared() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@._invalidate_queue(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@._queue_roles_of(@extschema@._queues) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@._queue_roles_trigger() FROM PUBLIC;
