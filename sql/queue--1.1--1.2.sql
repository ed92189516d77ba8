/* queue--1.1--1.2.sql: topics, consumers, failed receives that count */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.2'" to load this file. \quit

/*
 * What 1.2 adds (DESIGN.md "Topics", "Consumers"):
 *  - retry_delay, a queue attribute: a receive whose transaction rolls back
 *    counts, and its message comes back after retry_delay (failed.c);
 *  - topics: publish one message to every subscribed queue whose filters
 *    match, in the publisher's transaction (topic.c, filter.c);
 *  - consumers: the worker receives, calls a SQL handler, deletes and
 *    commits (consumer.c).
 *
 * CREATE EXTENSION of 1.2 runs queue--1.0.sql, queue--1.0--1.1.sql and this
 * file, so a fresh install and an upgraded one have the same catalog.
 */


/* ------------------------------------------------------------------------
 * Failed receives and retry_delay (failed.c)
 * ------------------------------------------------------------------------
 */



/* ------------------------------------------------------------------------
 * Topics (topic.c, filter.c)
 * ------------------------------------------------------------------------
 */

/*
 * The registry of topics; each topic also has a table queue_data.t<id>:
 * its owner is the topic's owner, its ACL the topic's grants (publish =
 * INSERT, manage = TRUNCATE), its rows the deduplication ids the topic
 * accepted in the last 5 minutes.
 */
CREATE TABLE @extschema@._topics (
	topic_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	topic_name text NOT NULL UNIQUE,
	fifo boolean NOT NULL,
	tags jsonb NOT NULL,
	created_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);
REVOKE ALL ON @extschema@._topics FROM PUBLIC;
COMMENT ON TABLE @extschema@._topics IS 'registry of topics (owner and grants are those of the table queue_data.t<topic_id>)';
SELECT pg_catalog.pg_extension_config_dump('@extschema@._topics', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@._topics_topic_id_seq', '');

/*
 * Subscriptions: a queue takes a topic's messages that pass its filters.
 * owner is the role that subscribed: a delivery needs its send privilege
 * on the queue.  A subscription goes with its topic or its queue.
 */
CREATE TABLE @extschema@._subscriptions (
	subscription_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	topic_id bigint NOT NULL REFERENCES @extschema@._topics ON DELETE CASCADE,
	queue_id bigint NOT NULL REFERENCES @extschema@._queues ON DELETE CASCADE,
	owner regrole NOT NULL,
	filter_tags text[],
	binding_keys text[],
	filter_policy jsonb,
	created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	UNIQUE (topic_id, queue_id)
);
CREATE INDEX ON @extschema@._subscriptions (queue_id);
REVOKE ALL ON @extschema@._subscriptions FROM PUBLIC;
COMMENT ON TABLE @extschema@._subscriptions IS 'which queues take which topics'' messages, through which filters';
SELECT pg_catalog.pg_extension_config_dump('@extschema@._subscriptions', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@._subscriptions_subscription_id_seq', '');

CREATE FUNCTION @extschema@._check_filters(filter_tags text[], binding_keys text[], filter_policy jsonb)
	RETURNS void LANGUAGE C AS 'MODULE_PATHNAME', 'queue_check_filters_sql';
REVOKE ALL ON FUNCTION @extschema@._check_filters(text[], text[], jsonb) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._check_filters(text[], text[], jsonb) IS 'raise 22023/22004 unless valid subscription filters';

CREATE FUNCTION @extschema@._topic_holds(topic_id bigint, role oid, privilege text)
	RETURNS boolean LANGUAGE C STRICT STABLE AS 'MODULE_PATHNAME', 'queue_topic_holds_sql';
REVOKE ALL ON FUNCTION @extschema@._topic_holds(bigint, oid, text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._topic_holds(bigint, oid, text) IS 'whether a role holds publish, manage or any privilege on a topic';

/* Callable by every role: it answers only for the role that calls. */
CREATE FUNCTION @extschema@._may_see_topic(topic_id bigint)
	RETURNS boolean LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'queue_may_see_topic_sql';
COMMENT ON FUNCTION @extschema@._may_see_topic(bigint) IS 'whether the current role holds a privilege on a topic (the topic views'' filter)';

/* Callable by every role: it answers only on what the role may see (42501 otherwise). */
CREATE FUNCTION @extschema@._topic_counter(topic_id bigint, subscription_id bigint, queue_id bigint)
	RETURNS bigint LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'queue_topic_counter_sql';
COMMENT ON FUNCTION @extschema@._topic_counter(bigint, bigint, bigint) IS 'messages a topic published (subscription_id null) or a subscription delivered';

CREATE FUNCTION @extschema@._topic_counter_reset(topic_id bigint, subscription_id bigint, dropped boolean)
	RETURNS void LANGUAGE C AS 'MODULE_PATHNAME', 'queue_topic_counter_reset_sql';
REVOKE ALL ON FUNCTION @extschema@._topic_counter_reset(bigint, bigint, boolean) FROM PUBLIC;

/* A topic by name, 42704 if there is none. */
CREATE FUNCTION @extschema@._lookup_topic(topic_name text, for_update boolean DEFAULT false)
	RETURNS @extschema@._topics LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	t @extschema@._topics;
BEGIN
	PERFORM @extschema@._check_name(topic_name, 'topic_name');
	IF for_update THEN
		SELECT * INTO t FROM @extschema@._topics r WHERE r.topic_name = topic_name FOR UPDATE;
	ELSE
		SELECT * INTO t FROM @extschema@._topics r WHERE r.topic_name = topic_name;
	END IF;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'topic "%" does not exist', topic_name USING ERRCODE = '42704';
	END IF;
	RETURN t;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._lookup_topic(text, boolean) FROM PUBLIC;

CREATE FUNCTION @extschema@._check_topic_manage(t @extschema@._topics, caller oid)
	RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF NOT @extschema@._topic_holds(t.topic_id, caller, 'manage') THEN
		RAISE EXCEPTION 'permission denied for topic "%"', t.topic_name
			USING ERRCODE = '42501',
			DETAIL = 'This needs the manage privilege on the topic.',
			HINT = pg_catalog.format('Its owner can run queue.grant_topic(%L, <role>, ''{manage}'').', t.topic_name);
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._check_topic_manage(@extschema@._topics, oid) FROM PUBLIC;

CREATE FUNCTION @extschema@._create_topic(topic_name text, fifo boolean, tags jsonb, caller oid)
	RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	t @extschema@._topics;
	tbl text;
BEGIN
	PERFORM @extschema@._check_name(topic_name, 'topic_name');
	IF fifo IS NULL THEN
		RAISE EXCEPTION 'argument "fifo" must not be null' USING ERRCODE = '22004';
	END IF;
	IF tags IS NULL THEN
		RAISE EXCEPTION 'argument "tags" must not be null' USING ERRCODE = '22004';
	END IF;
	IF pg_catalog.jsonb_typeof(tags) <> 'object' THEN
		RAISE EXCEPTION 'argument "tags" must be a JSON object' USING ERRCODE = '22023';
	END IF;
	/* A queue's bounds (SQS's): 50 tags, keys of 1-128 characters, values of at most 256. */
	IF (SELECT count(*) FROM pg_catalog.jsonb_object_keys(tags)) > 50 THEN
		RAISE EXCEPTION 'argument "tags" may hold at most 50 tags' USING ERRCODE = '22023';
	END IF;
	IF EXISTS (SELECT 1 FROM pg_catalog.jsonb_each(tags) e
			   WHERE pg_catalog.length(e.key) NOT BETWEEN 1 AND 128
				  OR pg_catalog.length(CASE pg_catalog.jsonb_typeof(e.value)
						WHEN 'string' THEN e.value #>> '{}' ELSE e.value::text END) > 256) THEN
		RAISE EXCEPTION 'argument "tags": keys must have 1 to 128 characters and values at most 256'
			USING ERRCODE = '22023';
	END IF;
	IF NOT pg_catalog.has_database_privilege(caller, pg_catalog.current_database(), 'CREATE') THEN
		RAISE EXCEPTION 'permission denied to create topic "%"', topic_name
			USING ERRCODE = '42501',
			DETAIL = 'Creating a topic needs the CREATE privilege on the database.';
	END IF;
	/* Serialise creators of one name, so "idempotent" holds under races. */
	PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('queue.create_topic:' || topic_name));
	SELECT * INTO t FROM @extschema@._topics r WHERE r.topic_name = topic_name;
	IF FOUND THEN
		IF (t.fifo, t.tags) IS NOT DISTINCT FROM (fifo, tags) THEN
			RETURN t.topic_id;
		END IF;
		RAISE EXCEPTION 'topic "%" already exists with other attributes', topic_name
			USING ERRCODE = '42710';
	END IF;
	INSERT INTO @extschema@._topics (topic_name, fifo, tags) VALUES (topic_name, fifo, tags)
	RETURNING * INTO t;
	tbl := pg_catalog.format('queue_data.t%s', t.topic_id);
	EXECUTE pg_catalog.format($ddl$
		CREATE TABLE %1$s (
			deduplication_id text COLLATE "C" NOT NULL,
			message_id bigint NOT NULL,
			accepted_at timestamptz NOT NULL,
			CONSTRAINT t%2$s_pkey PRIMARY KEY (deduplication_id)
		) WITH (autovacuum_vacuum_scale_factor = 0.01)$ddl$, tbl, t.topic_id);
	EXECUTE pg_catalog.format('CREATE INDEX t%1$s_accepted ON %2$s (accepted_at)', t.topic_id, tbl);
	EXECUTE pg_catalog.format('COMMENT ON TABLE %s IS %L', tbl,
		'deduplication ids of topic id ' || t.topic_id || '; its owner and ACL are the topic''s');
	EXECUTE pg_catalog.format('ALTER TABLE %s OWNER TO %s', tbl, caller::regrole);
	PERFORM @extschema@._topic_counter_reset(t.topic_id, NULL, false);
	RETURN t.topic_id;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._create_topic(text, boolean, jsonb, oid) FROM PUBLIC;

CREATE FUNCTION @extschema@._drop_topic(topic_name text, if_exists boolean, caller oid)
	RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	t @extschema@._topics;
BEGIN
	IF if_exists IS NULL THEN
		RAISE EXCEPTION 'argument "if_exists" must not be null' USING ERRCODE = '22004';
	END IF;
	PERFORM @extschema@._check_name(topic_name, 'topic_name');
	SELECT * INTO t FROM @extschema@._topics r WHERE r.topic_name = topic_name FOR UPDATE;
	IF NOT FOUND THEN
		IF if_exists THEN
			RETURN false;
		END IF;
		RAISE EXCEPTION 'topic "%" does not exist', topic_name USING ERRCODE = '42704';
	END IF;
	PERFORM @extschema@._check_topic_manage(t, caller);
	PERFORM @extschema@._topic_counter_reset(t.topic_id, s.subscription_id, true)
	FROM @extschema@._subscriptions s WHERE s.topic_id = t.topic_id;
	PERFORM @extschema@._topic_counter_reset(t.topic_id, NULL, true);
	/* The row first (its subscriptions go with it): the sql_drop trigger finds nothing left. */
	DELETE FROM @extschema@._topics r WHERE r.topic_id = t.topic_id;
	EXECUTE pg_catalog.format('DROP TABLE queue_data.t%s', t.topic_id);
	RETURN true;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._drop_topic(text, boolean, oid) FROM PUBLIC;

CREATE FUNCTION @extschema@._subscribe(topic_name text, queue_name text, filter_tags text[],
	binding_keys text[], filter_policy jsonb, caller oid)
	RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	t @extschema@._topics;
	q @extschema@._queues;
	s @extschema@._subscriptions;
BEGIN
	t := @extschema@._lookup_topic(topic_name);
	q := @extschema@._lookup(queue_name);
	PERFORM @extschema@._check_topic_manage(t, caller);
	IF NOT @extschema@._may(q, caller, 'send') THEN
		RAISE EXCEPTION 'permission denied for queue "%"', queue_name
			USING ERRCODE = '42501',
			DETAIL = 'Subscribing a queue to a topic needs the send privilege on the queue.';
	END IF;
	IF t.fifo <> q.fifo THEN
		RAISE EXCEPTION 'argument "queue_name": % queue "%" cannot subscribe to % topic "%"',
			CASE WHEN q.fifo THEN 'FIFO' ELSE 'standard' END, queue_name,
			CASE WHEN t.fifo THEN 'FIFO' ELSE 'standard' END, topic_name
			USING ERRCODE = '22023',
			HINT = 'A FIFO topic takes FIFO queues, a standard topic standard queues.';
	END IF;
	PERFORM @extschema@._check_filters(filter_tags, binding_keys, filter_policy);
	/* Serialise subscribers of one pair, so "the same call again" holds under races. */
	PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext(
		pg_catalog.format('queue.subscribe:%s:%s', t.topic_id, q.queue_id)));
	SELECT * INTO s FROM @extschema@._subscriptions r
	WHERE r.topic_id = t.topic_id AND r.queue_id = q.queue_id;
	IF FOUND THEN
		IF (s.filter_tags, s.binding_keys, s.filter_policy)
			IS NOT DISTINCT FROM (filter_tags, binding_keys, filter_policy) THEN
			RETURN s.subscription_id;
		END IF;
		RAISE EXCEPTION 'queue "%" is subscribed to topic "%" with other filters', queue_name, topic_name
			USING ERRCODE = '42710',
			HINT = 'Unsubscribe it first to change its filters.';
	END IF;
	INSERT INTO @extschema@._subscriptions (topic_id, queue_id, owner, filter_tags, binding_keys, filter_policy)
	VALUES (t.topic_id, q.queue_id, caller::regrole, filter_tags, binding_keys, filter_policy)
	RETURNING * INTO s;
	PERFORM @extschema@._topic_counter_reset(t.topic_id, s.subscription_id, false);
	/* Publishers re-read the topic's subscriptions (topic.c). */
	PERFORM @extschema@._invalidate(pg_catalog.format('queue_data.t%s', t.topic_id)::regclass);
	RETURN s.subscription_id;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._subscribe(text, text, text[], text[], jsonb, oid) FROM PUBLIC;

/* The topic's managers and the queue's may end a subscription. */
CREATE FUNCTION @extschema@._unsubscribe(topic_name text, queue_name text, caller oid)
	RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	t @extschema@._topics;
	q @extschema@._queues;
	sid bigint;
BEGIN
	t := @extschema@._lookup_topic(topic_name);
	q := @extschema@._lookup(queue_name);
	IF NOT @extschema@._topic_holds(t.topic_id, caller, 'manage') AND NOT @extschema@._may(q, caller, 'manage') THEN
		RAISE EXCEPTION 'permission denied for topic "%"', topic_name
			USING ERRCODE = '42501',
			DETAIL = 'This needs the manage privilege on the topic or on the queue.';
	END IF;
	DELETE FROM @extschema@._subscriptions r WHERE r.topic_id = t.topic_id AND r.queue_id = q.queue_id
	RETURNING r.subscription_id INTO sid;
	IF sid IS NULL THEN
		RETURN false;
	END IF;
	PERFORM @extschema@._topic_counter_reset(t.topic_id, sid, true);
	PERFORM @extschema@._invalidate(pg_catalog.format('queue_data.t%s', t.topic_id)::regclass);
	RETURN true;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._unsubscribe(text, text, oid) FROM PUBLIC;

/*
 * The grantee of queue.grant/revoke and grant_topic/revoke_topic:
 * role_name is a role's name exactly as stored; 'public' in any case means
 * PUBLIC unless a role of exactly that name exists; a name in double quotes
 * is always a role, as in GRANT.  rname is the role's name (null for
 * PUBLIC).
 */
CREATE FUNCTION @extschema@._grantee(role_name text, OUT grantee text, OUT rname text)
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF role_name IS NULL THEN
		RAISE EXCEPTION 'argument "role_name" must not be null' USING ERRCODE = '22004';
	END IF;
	IF length(role_name) >= 2 AND left(role_name, 1) = '"' AND right(role_name, 1) = '"' THEN
		rname := replace(substr(role_name, 2, length(role_name) - 2), '""', '"');
	ELSIF EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = role_name) THEN
		rname := role_name;
	ELSIF lower(role_name) = 'public' THEN
		grantee := 'PUBLIC';
		RETURN;
	ELSE
		rname := role_name;
	END IF;
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = rname) THEN
		RAISE EXCEPTION 'role "%" does not exist', rname USING ERRCODE = '42704',
			DETAIL = 'argument "role_name" names no role.';
	END IF;
	grantee := quote_ident(rname);
END
$$;
REVOKE ALL ON FUNCTION @extschema@._grantee(text) FROM PUBLIC;

/* The privileges argument of the grant and revoke functions: some of allowed. */
CREATE FUNCTION @extschema@._check_privileges(privileges text[], allowed text[], kind text)
	RETURNS void LANGUAGE plpgsql IMMUTABLE
	SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	p text;
BEGIN
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
		IF NOT p = ANY (allowed) THEN
			RAISE EXCEPTION 'argument "privileges": unknown %privilege "%"', kind, p
				USING ERRCODE = '22023',
				HINT = 'The ' || kind || 'privileges are ' || array_to_string(allowed, ', ') || '.';
		END IF;
	END LOOP;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._check_privileges(text[], text[], text) FROM PUBLIC;

/* queue.grant / queue.revoke, with the role name and privilege rules shared with topics. */
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
BEGIN
	q := @extschema@._lookup(queue_name, true);
	PERFORM @extschema@._check_manage(q, caller);
	g := @extschema@._grantee(role_name);
	PERFORM @extschema@._check_privileges(privileges, '{send, receive, manage}', '');
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

/* grant_topic / revoke_topic: publish and manage, as INSERT and TRUNCATE on t<id>. */
CREATE FUNCTION @extschema@._grant_revoke_topic(topic_name text, role_name text, privileges text[],
	is_grant boolean, caller oid)
	RETURNS void LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	t @extschema@._topics;
	g record;
	tbl regclass;
	modes text;
BEGIN
	t := @extschema@._lookup_topic(topic_name, true);
	PERFORM @extschema@._check_topic_manage(t, caller);
	g := @extschema@._grantee(role_name);
	PERFORM @extschema@._check_privileges(privileges, '{publish, manage}', 'topic ');
	tbl := format('queue_data.t%s', t.topic_id)::regclass;
	/* The owner's privileges are not in the ACL's hands. */
	IF g.rname IS NOT NULL AND EXISTS (SELECT 1 FROM pg_catalog.pg_class c
									  JOIN pg_catalog.pg_roles r ON r.oid = c.relowner
									  WHERE c.oid = tbl AND r.rolname = g.rname) THEN
		RETURN;
	END IF;
	SELECT string_agg(DISTINCT CASE v WHEN 'publish' THEN 'INSERT' ELSE 'TRUNCATE' END, ', ')
	INTO modes FROM unnest(privileges) v;
	IF is_grant THEN
		EXECUTE format('GRANT %s ON TABLE %s TO %s', modes, tbl, g.grantee);
	ELSE
		EXECUTE format('REVOKE %s ON TABLE %s FROM %s', modes, tbl, g.grantee);
	END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._grant_revoke_topic(text, text, text[], boolean, oid) FROM PUBLIC;

CREATE FUNCTION @extschema@._grant_topic(topic_name text, role_name text, privileges text[], caller oid)
	RETURNS void LANGUAGE sql
	SET search_path = pg_catalog, pg_temp AS $$
	SELECT @extschema@._grant_revoke_topic(topic_name, role_name, privileges, true, caller)
$$;
REVOKE ALL ON FUNCTION @extschema@._grant_topic(text, text, text[], oid) FROM PUBLIC;

CREATE FUNCTION @extschema@._revoke_topic(topic_name text, role_name text, privileges text[], caller oid)
	RETURNS void LANGUAGE sql
	SET search_path = pg_catalog, pg_temp AS $$
	SELECT @extschema@._grant_revoke_topic(topic_name, role_name, privileges, false, caller)
$$;
REVOKE ALL ON FUNCTION @extschema@._revoke_topic(text, text, text[], oid) FROM PUBLIC;

/* The API: administrative calls go through queue_admin_call (acl.c). */
CREATE FUNCTION @extschema@.create_topic(topic_name text, fifo boolean DEFAULT false,
	tags jsonb DEFAULT '{}')
	RETURNS bigint LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
CREATE FUNCTION @extschema@.drop_topic(topic_name text, if_exists boolean DEFAULT false)
	RETURNS boolean LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
CREATE FUNCTION @extschema@.subscribe(topic_name text, queue_name text, filter_tags text[] DEFAULT NULL,
	binding_keys text[] DEFAULT NULL, filter_policy jsonb DEFAULT NULL)
	RETURNS bigint LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
CREATE FUNCTION @extschema@.unsubscribe(topic_name text, queue_name text)
	RETURNS boolean LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
CREATE FUNCTION @extschema@.grant_topic(topic_name text, role_name text, privileges text[])
	RETURNS void LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
CREATE FUNCTION @extschema@.revoke_topic(topic_name text, role_name text, privileges text[])
	RETURNS void LANGUAGE C AS 'MODULE_PATHNAME', 'queue_admin_call';
COMMENT ON FUNCTION @extschema@.create_topic(text, boolean, jsonb) IS 'create a topic (idempotent with the same attributes); returns its id';
COMMENT ON FUNCTION @extschema@.drop_topic(text, boolean) IS 'drop a topic and its subscriptions (never the queues)';
COMMENT ON FUNCTION @extschema@.subscribe(text, text, text[], text[], jsonb) IS 'make a queue take a topic''s messages that pass the filters; returns the subscription id';
COMMENT ON FUNCTION @extschema@.unsubscribe(text, text) IS 'end a subscription; false if there was none';
COMMENT ON FUNCTION @extschema@.grant_topic(text, text, text[]) IS 'give a role publish and/or manage on a topic';
COMMENT ON FUNCTION @extschema@.revoke_topic(text, text, text[]) IS 'take publish and/or manage on a topic from a role';

CREATE FUNCTION @extschema@.publish(topic_name text, body text, tags text[] DEFAULT NULL,
	routing_key text DEFAULT NULL, attributes jsonb DEFAULT NULL, message_group_id text DEFAULT NULL,
	deduplication_id text DEFAULT NULL, delay interval DEFAULT NULL)
	RETURNS TABLE (message_id bigint, delivered integer, duplicate boolean)
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_publish';
CREATE FUNCTION @extschema@.publish(topic_name text, body jsonb, tags text[] DEFAULT NULL,
	routing_key text DEFAULT NULL, attributes jsonb DEFAULT NULL, message_group_id text DEFAULT NULL,
	deduplication_id text DEFAULT NULL, delay interval DEFAULT NULL)
	RETURNS TABLE (message_id bigint, delivered integer, duplicate boolean)
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_publish';
CREATE FUNCTION @extschema@.publish_batch(topic_name text, bodies text[], tags text[] DEFAULT NULL,
	routing_keys text[] DEFAULT NULL, attributes jsonb[] DEFAULT NULL,
	message_group_ids text[] DEFAULT NULL, deduplication_ids text[] DEFAULT NULL)
	RETURNS TABLE (ordinal integer, message_id bigint, delivered integer, duplicate boolean)
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_publish_batch';
CREATE FUNCTION @extschema@.publish_batch(topic_name text, bodies jsonb[], tags text[] DEFAULT NULL,
	routing_keys text[] DEFAULT NULL, attributes jsonb[] DEFAULT NULL,
	message_group_ids text[] DEFAULT NULL, deduplication_ids text[] DEFAULT NULL)
	RETURNS TABLE (ordinal integer, message_id bigint, delivered integer, duplicate boolean)
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_publish_batch';
COMMENT ON FUNCTION @extschema@.publish(text, text, text[], text, jsonb, text, text, interval) IS 'publish a message to every subscribed queue whose filters match, in this transaction';
COMMENT ON FUNCTION @extschema@.publish(text, jsonb, text[], text, jsonb, text, text, interval) IS 'publish a message to every subscribed queue whose filters match, in this transaction';
COMMENT ON FUNCTION @extschema@.publish_batch(text, text[], text[], text[], jsonb[], text[], text[]) IS 'publish messages to every subscribed queue whose filters match each, in this transaction';
COMMENT ON FUNCTION @extschema@.publish_batch(text, jsonb[], text[], text[], jsonb[], text[], text[]) IS 'publish messages to every subscribed queue whose filters match each, in this transaction';

/* A role sees the topics it holds a privilege on, and their subscriptions and those of its queues. */
CREATE VIEW @extschema@.topics WITH (security_barrier) AS
	SELECT t.topic_name, t.topic_id, t.fifo, t.tags, c.relowner::regrole AS owner, t.created_at,
		   @extschema@._topic_counter(t.topic_id, NULL, NULL) AS published
	FROM @extschema@._topics t
	JOIN pg_catalog.pg_class c
	  ON c.relnamespace = 'queue_data'::regnamespace AND c.relname = 't' || t.topic_id
	WHERE @extschema@._may_see_topic(t.topic_id);
COMMENT ON VIEW @extschema@.topics IS 'one row a topic the current role holds a privilege on';

CREATE VIEW @extschema@.subscriptions WITH (security_barrier) AS
	SELECT t.topic_name, q.queue_name, s.subscription_id, s.filter_tags, s.binding_keys,
		   s.filter_policy, s.created_at, @extschema@._topic_counter(s.topic_id, s.subscription_id, s.queue_id) AS delivered
	FROM @extschema@._subscriptions s
	JOIN @extschema@._topics t ON t.topic_id = s.topic_id
	JOIN @extschema@._queues q ON q.queue_id = s.queue_id
	WHERE @extschema@._may_see_topic(s.topic_id) OR @extschema@._may_see(s.queue_id);
COMMENT ON VIEW @extschema@.subscriptions IS 'subscriptions of the topics or queues the current role holds a privilege on';
GRANT SELECT ON @extschema@.topics, @extschema@.subscriptions TO PUBLIC;

/* A topic whose table is dropped by anything but drop_topic (DROP OWNED) is forgotten. */
CREATE FUNCTION @extschema@._forget_dropped_topics()
	RETURNS event_trigger LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	id bigint;
BEGIN
	FOR id IN SELECT substr(o.object_name, 2)::bigint
			  FROM pg_catalog.pg_event_trigger_dropped_objects() o
			  WHERE o.object_type = 'table' AND o.schema_name = 'queue_data'
				AND o.object_name ~ '^t[0-9]+$' LOOP
		PERFORM @extschema@._topic_counter_reset(id, s.subscription_id, true)
		FROM @extschema@._subscriptions s WHERE s.topic_id = id;
		DELETE FROM @extschema@._topics r WHERE r.topic_id = id;
		IF FOUND THEN
			PERFORM @extschema@._topic_counter_reset(id, NULL, true);
		END IF;
	END LOOP;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._forget_dropped_topics() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._forget_dropped_topics() IS 'forget topics whose tables were dropped (DROP OWNED, DROP TABLE)';
CREATE EVENT TRIGGER queue_forget_dropped_topics ON sql_drop
	EXECUTE FUNCTION @extschema@._forget_dropped_topics();




/* ------------------------------------------------------------------------
 * Consumers (consumer.c)
 * ------------------------------------------------------------------------
 */

