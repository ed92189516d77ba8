/* queue--1.3--1.3.1.sql: what runs in the background is safe (issue 23) */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.3.1'" to load this file. \quit

/*
 * 1.3.1 changes no message and no queue.  It is numbered 1.3.1, not 1.4,
 * because DESIGN.md keeps 1.4 for the storage rework.  What it adds:
 *  - consumers keep the search_path their creator had at create_consumer
 *    (the handler runs under it) and show it in queue.consumers, with the
 *    state 'waiting' when no process is free for them;
 *  - roles that own a consumer or a subscription cannot be dropped.
 */


/* ------------------------------------------------------------------------
 * Consumers: the creator's search_path, and the state 'waiting'
 * (consumer_worker.c, consumer_tend.c, elevated.c)
 * ------------------------------------------------------------------------
 */

/*
 * The handler runs under the search_path its creator had at
 * create_consumer, so a handler naming its tables unqualified works as it
 * did when its author tried it.  Consumers made before 1.3.1 take
 * PostgreSQL's default.
 */
CREATE FUNCTION @extschema@._caller_search_path()
	RETURNS text LANGUAGE C AS 'MODULE_PATHNAME', 'queue_caller_search_path_sql';
REVOKE ALL ON FUNCTION @extschema@._caller_search_path() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._caller_search_path() IS 'the search_path of the session calling the administrative function now running (create_consumer keeps it)';

/*
 * _create_consumer (1.3) inserts the row without naming the column: the
 * default takes the caller's search_path, or PostgreSQL's default when no
 * administrative call is running (this update, a restore's COPY names the
 * column).
 */
ALTER TABLE @extschema@._consumers ADD COLUMN search_path text NOT NULL
	DEFAULT COALESCE(@extschema@._caller_search_path(), '"$user", public');

/* The shared counters gain why a consumer waits for a process (null: it does not). */
DROP VIEW @extschema@.consumers;
DROP FUNCTION @extschema@._consumer_stats();
CREATE FUNCTION @extschema@._consumer_stats(OUT consumer_id bigint, OUT processed bigint,
	OUT failed bigint, OUT failing boolean, OUT last_error text, OUT last_error_at timestamptz,
	OUT last_success_at timestamptz, OUT waiting text)
	RETURNS SETOF record LANGUAGE C STABLE AS 'MODULE_PATHNAME', 'queue_consumer_stats_sql';
COMMENT ON FUNCTION @extschema@._consumer_stats() IS 'runtime counters of the consumers of queues the current role holds a privilege on (none without preload)';

/*
 * A role sees the consumers of the queues it holds a privilege on.  state:
 * paused, failing (the last batch with messages failed), waiting (no
 * process free for it: last_error says why), running.
 */
CREATE VIEW @extschema@.consumers WITH (security_barrier) AS
	SELECT c.consumer_name, q.queue_name, c.handler, c.owner AS role, c.search_path, c.batch_size,
		   c.concurrency,
		   CASE WHEN c.paused THEN 'paused' WHEN s.failing THEN 'failing'
				WHEN s.waiting IS NOT NULL THEN 'waiting' ELSE 'running' END AS state,
		   s.processed, s.failed,
		   CASE WHEN s.waiting IS NOT NULL AND NOT c.paused AND NOT s.failing
				THEN s.waiting ELSE s.last_error END AS last_error,
		   s.last_error_at, s.last_success_at
	FROM @extschema@._consumers c
	JOIN @extschema@._queues q ON q.queue_id = c.queue_id
	LEFT JOIN @extschema@._consumer_stats() s ON s.consumer_id = c.consumer_id
	WHERE @extschema@._may_see(c.queue_id);
COMMENT ON VIEW @extschema@.consumers IS 'consumers of the queues the current role holds a privilege on, with their state and counters';
GRANT SELECT ON @extschema@.consumers TO PUBLIC;


/* ------------------------------------------------------------------------
 * Roles that own a consumer or a subscription cannot be dropped
 * (DESIGN.md "Consumers", "Access"; role_refs.c)
 * ------------------------------------------------------------------------
 */

/*
 * The owner of a consumer or a subscription is a regrole in our registry,
 * which PostgreSQL does not track: DROP ROLE would leave a dangling OID.
 * Roles are cluster-wide, so only pg_shdepend can refuse a DROP ROLE run
 * in another database.  PostgreSQL records an entry there for every
 * grantee of a privilege, so each such owner holds a harmless one: SELECT
 * on one of the two empty tables below, granted with its first consumer
 * (subscription) and revoked with its last.  DROP ROLE then fails with
 * 2BP01, naming the table here (role_refs.c names the consumers and
 * subscriptions first) and counting it in another database; pg_dump
 * writes the grants by role name; DROP OWNED takes them away, and the
 * event trigger below drops the role's consumers and subscriptions with
 * them; REASSIGN OWNED moves them (role_refs.c, from the utility hook).
 *
 * A table privilege, not a column's: DROP OWNED BY a role run by that role
 * (or a member) revokes the role's privileges as its runner, which must
 * hold some privilege on the table itself, or PostgreSQL refuses with
 * 42501 where a column privilege is all there is.
 */
CREATE TABLE @extschema@._consumer_owners ();
CREATE TABLE @extschema@._subscription_owners ();
REVOKE ALL ON @extschema@._consumer_owners, @extschema@._subscription_owners FROM PUBLIC;
COMMENT ON TABLE @extschema@._consumer_owners IS 'always empty: the owners of consumers hold SELECT on it, so PostgreSQL refuses to drop them';
COMMENT ON TABLE @extschema@._subscription_owners IS 'always empty: the owners of subscriptions hold SELECT on it, so PostgreSQL refuses to drop them';

CREATE INDEX ON @extschema@._consumers (owner);
CREATE INDEX ON @extschema@._subscriptions (owner);

/*
 * The GRANT or REVOKE itself, in C (role_refs.c): run inside an extension
 * script (the end of this file, a later update; a restore's CREATE
 * EXTENSION holds no rows), PostgreSQL would record a grant as one of the
 * extension's initial privileges, which pg_dump leaves out and which
 * (before 17) keeps the role's OID after the role is gone.  These grants
 * are never initial; the C function says so while it runs the statement.
 */
CREATE FUNCTION @extschema@._owner_ref_acl(role oid, what text, granted boolean)
	RETURNS void LANGUAGE C STRICT AS 'MODULE_PATHNAME', 'queue_owner_ref_acl_sql';
REVOKE ALL ON FUNCTION @extschema@._owner_ref_acl(oid, text, boolean) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._owner_ref_acl(oid, text, boolean) IS 'grant or revoke SELECT on queue._consumer_owners or _subscription_owners, never as an initial privilege';

/*
 * Grant role SELECT on _consumer_owners if it owns a consumer (what =
 * 'consumer'), on _subscription_owners if it owns a subscription
 * ('subscription'); revoke it if not.  Both tables are locked first, in
 * that order (the mode excludes itself): two changes of one table's ACL at
 * once would fail, and under READ COMMITTED the checks of what the role
 * owns and holds see every commit before it.  Under REPEATABLE READ and
 * SERIALIZABLE they may not: an owner is then granted its privilege even
 * if it seems to hold it, and never revoked it (a grant too many only asks
 * for DROP OWNED; a missing one would let the role go).
 */
CREATE FUNCTION @extschema@._sync_owner_ref(role oid, what text)
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	tbl regclass;
	fresh boolean;
	owns boolean;
	holds boolean;
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.oid = role) THEN
		RETURN;					/* dropped before 1.3.1: nothing left to protect */
	END IF;
	LOCK TABLE @extschema@._consumer_owners, @extschema@._subscription_owners IN SHARE ROW EXCLUSIVE MODE;
	/* Only READ COMMITTED reads below with a snapshot taken after the lock. */
	fresh := pg_catalog.current_setting('transaction_isolation') = 'read committed';
	IF what = 'consumer' THEN
		tbl := '@extschema@._consumer_owners'::pg_catalog.regclass;
		owns := EXISTS (SELECT FROM @extschema@._consumers c WHERE c.owner::oid = role);
	ELSE
		tbl := '@extschema@._subscription_owners'::pg_catalog.regclass;
		owns := EXISTS (SELECT FROM @extschema@._subscriptions s WHERE s.owner::oid = role);
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
REVOKE ALL ON FUNCTION @extschema@._sync_owner_ref(oid, text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._sync_owner_ref(oid, text) IS 'grant or revoke a role SELECT on queue._consumer_owners or _subscription_owners as it owns consumers or subscriptions';

/* Every change of an owner, however made (an API call, a cascade, a restore's COPY). */
CREATE FUNCTION @extschema@._owner_ref_trigger()
	RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	what text := CASE TG_TABLE_NAME WHEN '_consumers' THEN 'consumer' ELSE 'subscription' END;
BEGIN
	IF TG_OP IN ('INSERT', 'UPDATE') THEN
		PERFORM @extschema@._sync_owner_ref(NEW.owner::oid, what);
	END IF;
	IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND OLD.owner::oid <> NEW.owner::oid) THEN
		PERFORM @extschema@._sync_owner_ref(OLD.owner::oid, what);
	END IF;
	RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._owner_ref_trigger() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._owner_ref_trigger() IS 'keep the grants on queue._consumer_owners and _subscription_owners in step with the owners of consumers and subscriptions';
CREATE TRIGGER owner_ref AFTER INSERT OR DELETE OR UPDATE OF owner ON @extschema@._consumers
	FOR EACH ROW EXECUTE FUNCTION @extschema@._owner_ref_trigger();
CREATE TRIGGER owner_ref AFTER INSERT OR DELETE OR UPDATE OF owner ON @extschema@._subscriptions
	FOR EACH ROW EXECUTE FUNCTION @extschema@._owner_ref_trigger();

/* DROP OWNED BY roles: their consumers and subscriptions go (role_refs.c calls this). */
CREATE FUNCTION @extschema@._drop_owned_refs(roles oid[])
	RETURNS void LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	s record;
	topic regclass;
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
END
$$;
REVOKE ALL ON FUNCTION @extschema@._drop_owned_refs(oid[]) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._drop_owned_refs(oid[]) IS 'DROP OWNED: drop the consumers and subscriptions of these roles';

/* REASSIGN OWNED BY roles TO new_owner: theirs become new_owner's (role_refs.c calls this). */
CREATE FUNCTION @extschema@._reassign_owned_refs(roles oid[], new_owner oid)
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
END
$$;
REVOKE ALL ON FUNCTION @extschema@._reassign_owned_refs(oid[], oid) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._reassign_owned_refs(oid[], oid) IS 'REASSIGN OWNED: give the consumers and subscriptions of these roles to new_owner';

/*
 * DROP OWNED fires event triggers (REASSIGN OWNED and DROP ROLE do not:
 * the utility hook sees those).  At its start, when the caller may drop
 * the roles' objects, their consumers and subscriptions are dropped, and
 * with them their privileges on the two tables above, before DROP OWNED
 * revokes its way through the roles' privileges.  In C: only the statement
 * names the roles.
 */
CREATE FUNCTION @extschema@._drop_owned_trigger()
	RETURNS event_trigger LANGUAGE C AS 'MODULE_PATHNAME', 'queue_drop_owned_trigger';
REVOKE ALL ON FUNCTION @extschema@._drop_owned_trigger() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._drop_owned_trigger() IS 'DROP OWNED: drop the consumers and subscriptions of its roles';
CREATE EVENT TRIGGER queue_drop_owned ON ddl_command_start WHEN TAG IN ('DROP OWNED')
	EXECUTE FUNCTION @extschema@._drop_owned_trigger();

/* The owners of consumers and subscriptions made before 1.3.1. */
SELECT @extschema@._sync_owner_ref(o.owner, 'consumer')
FROM (SELECT DISTINCT c.owner::oid AS owner FROM @extschema@._consumers c) o;
SELECT @extschema@._sync_owner_ref(o.owner, 'subscription')
FROM (SELECT DISTINCT s.owner::oid AS owner FROM @extschema@._subscriptions s) o;


/* ------------------------------------------------------------------------
 * create_consumer refuses a caller without receive on the queue (42501)
 * before it looks at the handler (22023, 42883): DESIGN.md "Access",
 * refused before anything else.  1.3's body with that one check moved up.
 * ------------------------------------------------------------------------
 */
CREATE OR REPLACE FUNCTION @extschema@._create_consumer(consumer_name text, queue_name text, handler regprocedure,
	batch_size integer, concurrency integer, retry text, caller oid)
	RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
	q @extschema@._queues;
	c @extschema@._consumers;
	p record;
BEGIN
	PERFORM @extschema@._check_consumer_writable();
	PERFORM @extschema@._check_name(consumer_name, 'consumer_name');
	q := @extschema@._lookup(queue_name);
	IF NOT @extschema@._may(q, caller, 'receive') THEN
		RAISE EXCEPTION 'permission denied for queue "%"', queue_name
			USING ERRCODE = '42501',
			DETAIL = 'Creating a consumer needs the receive privilege on the queue.',
			HINT = pg_catalog.format('Its owner can run queue.grant(%L, <role>, ''{receive}'').', queue_name);
	END IF;
	IF handler IS NULL THEN
		RAISE EXCEPTION 'argument "handler" must not be null' USING ERRCODE = '22004';
	END IF;
	IF batch_size IS NULL THEN
		RAISE EXCEPTION 'argument "batch_size" must not be null' USING ERRCODE = '22004';
	END IF;
	IF concurrency IS NULL THEN
		RAISE EXCEPTION 'argument "concurrency" must not be null' USING ERRCODE = '22004';
	END IF;
	IF retry IS NULL THEN
		RAISE EXCEPTION 'argument "retry" must not be null' USING ERRCODE = '22004';
	END IF;
	IF batch_size NOT BETWEEN 1 AND 1000 THEN
		RAISE EXCEPTION 'argument "batch_size" must be between 1 and 1000'
			USING ERRCODE = '22023', DETAIL = pg_catalog.format('The value given was %s.', batch_size);
	END IF;
	IF concurrency NOT BETWEEN 1 AND 64 THEN
		RAISE EXCEPTION 'argument "concurrency" must be between 1 and 64'
			USING ERRCODE = '22023', DETAIL = pg_catalog.format('The value given was %s.', concurrency);
	END IF;
	IF retry NOT IN ('exponential', 'fixed') THEN
		RAISE EXCEPTION 'argument "retry" must be ''exponential'' or ''fixed'''
			USING ERRCODE = '22023', DETAIL = pg_catalog.format('The value given was %L.', retry);
	END IF;
	SELECT f.prokind, f.pronargs, f.proargtypes INTO p FROM pg_catalog.pg_proc f WHERE f.oid = handler;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'argument "handler": function with OID % does not exist', handler::oid
			USING ERRCODE = '42883';
	END IF;
	IF p.prokind NOT IN ('f', 'p') OR p.pronargs <> 1
	   OR p.proargtypes[0] <> '@extschema@.message[]'::pg_catalog.regtype THEN
		RAISE EXCEPTION 'argument "handler": % must be a function or procedure taking one argument of type queue.message[]',
			handler::text
			USING ERRCODE = '22023';
	END IF;
	IF NOT pg_catalog.has_function_privilege(caller, handler::oid, 'EXECUTE') THEN
		RAISE EXCEPTION 'permission denied for function %', handler::text
			USING ERRCODE = '42501',
			DETAIL = 'Creating a consumer needs the EXECUTE privilege on its handler.';
	END IF;
	/* Serialise creators of one name, so "idempotent" holds under races. */
	PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('queue.create_consumer:' || consumer_name));
	SELECT * INTO c FROM @extschema@._consumers r WHERE r.consumer_name = consumer_name;
	IF FOUND THEN
		IF (c.queue_id, c.handler::oid, c.batch_size, c.concurrency, c.retry)
		   IS NOT DISTINCT FROM (q.queue_id, handler::oid, batch_size, concurrency, retry) THEN
			RETURN c.consumer_id;
		END IF;
		RAISE EXCEPTION 'consumer "%" already exists with other attributes', consumer_name
			USING ERRCODE = '42710',
			HINT = 'Drop it first to change its attributes.';
	END IF;
	INSERT INTO @extschema@._consumers (consumer_name, queue_id, handler, owner, batch_size, concurrency, retry)
	VALUES (consumer_name, q.queue_id, handler, caller::regrole, batch_size, concurrency, retry)
	RETURNING * INTO c;
	PERFORM @extschema@._consumer_reset(c.consumer_id, c.queue_id);
	/* The worker re-reads the consumers (consumer_worker.c). */
	PERFORM @extschema@._invalidate('@extschema@._consumers'::regclass);
	RETURN c.consumer_id;
END
$$;
