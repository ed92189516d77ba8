/* queue--1.3.1--1.3.2.sql: Amazon SQS's own API, served by PostgreSQL (issue 27) */

\echo Use "ALTER EXTENSION queue UPDATE TO '1.3.2'" to load this file. \quit

/*
 * 1.3.2 changes no message and no queue.  It adds what the SQS endpoint
 * (the queue_sqs library, src/sqs/) needs from the database: access keys
 * mapped to roles, the long-poll hint its workers read before they park a
 * request, and the record of message move tasks.  It is not 1.4, because
 * DESIGN.md keeps 1.4 for the storage rework.
 */


/* ------------------------------------------------------------------------
 * Long polls parked by the SQS endpoint (wait.c, core_api.h)
 * ------------------------------------------------------------------------
 */
CREATE FUNCTION @extschema@._wait_hint(queue_name text,
	OUT queue_id bigint, OUT generation bigint, OUT next_visible_at timestamptz)
	RETURNS record LANGUAGE C AS 'MODULE_PATHNAME', 'queue_wait_hint_sql';
COMMENT ON FUNCTION @extschema@._wait_hint(text) IS 'SQS endpoint: the queue id, its wait slot generation (read before a receive it may park) and when its next message turns visible; needs receive, like queue.receive, so it is executable as any API function is (the endpoint calls it as the key''s role)';


/* ------------------------------------------------------------------------
 * Access keys of the SQS endpoint (DESIGN.md "SQS API", Keys;
 * access_keys.c)
 * ------------------------------------------------------------------------
 */

/*
 * One row per key: the role its requests run as, and its secret encrypted
 * (access_keys.c: a keystream of HMAC-SHA256 blocks under a key derived
 * from queue._secret, with a random nonce per key).  Not dumped: the key
 * that encrypts the secrets (queue._secret) is never dumped, so the rows
 * would be useless in a restored copy.  After a restore the keys are made
 * again with queue.create_access_key, with the same pair when the clients
 * keep their settings.
 */
CREATE TABLE @extschema@._access_keys (
	access_key_id text COLLATE "C" PRIMARY KEY,
	role regrole NOT NULL,
	nonce bytea NOT NULL,
	secret bytea NOT NULL,
	created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	last_used_at timestamptz
);
REVOKE ALL ON @extschema@._access_keys FROM PUBLIC;
CREATE INDEX ON @extschema@._access_keys (role);
COMMENT ON TABLE @extschema@._access_keys IS 'access keys of the SQS endpoint: the role each one acts as, its secret encrypted under a key derived from queue._secret (never dumped)';

CREATE FUNCTION @extschema@.create_access_key(role regrole, access_key_id text DEFAULT NULL,
	secret_access_key text DEFAULT NULL)
	RETURNS TABLE (access_key_id text, secret_access_key text)
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_create_access_key';
COMMENT ON FUNCTION @extschema@.create_access_key(regrole, text, text) IS 'make an access key of the SQS endpoint for a role (a superuser, or the role itself); a given pair is kept, the same call again returns it';

CREATE FUNCTION @extschema@.drop_access_key(access_key_id text)
	RETURNS boolean LANGUAGE C AS 'MODULE_PATHNAME', 'queue_drop_access_key';
COMMENT ON FUNCTION @extschema@.drop_access_key(text) IS 'drop an access key (a superuser, or the key''s role); false when there is none';

/* Only the endpoint's workers, which run as a superuser, read secrets. */
CREATE FUNCTION @extschema@._access_key_secret(access_key_id text)
	RETURNS TABLE (role oid, secret text)
	LANGUAGE C AS 'MODULE_PATHNAME', 'queue_access_key_secret';
REVOKE ALL ON FUNCTION @extschema@._access_key_secret(text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._access_key_secret(text) IS 'SQS endpoint: the role and the decrypted secret of an access key (superusers only); notes when it was last used';

/* Never the secret; a role sees the keys of the roles it is a member of. */
CREATE VIEW @extschema@.access_keys WITH (security_barrier) AS
	SELECT k.access_key_id, k.role, k.created_at, k.last_used_at
	FROM @extschema@._access_keys k
	WHERE pg_catalog.pg_has_role(k.role::pg_catalog.oid, 'MEMBER');
COMMENT ON VIEW @extschema@.access_keys IS 'access keys of the SQS endpoint of the roles the current role is a member of (a superuser: all), never their secrets';
GRANT SELECT ON @extschema@.access_keys TO PUBLIC;


/* ------------------------------------------------------------------------
 * Roles that hold an access key cannot be dropped (role_refs.c, as for
 * consumers and subscriptions in queue--1.3--1.3.1.sql)
 * ------------------------------------------------------------------------
 */

/*
 * A dropped role's OID may be taken by a new role, which would then hold
 * the old role's keys.  So the holder of a key holds SELECT on this empty
 * table, which PostgreSQL records in pg_shdepend: DROP ROLE is refused
 * (role_refs.c names the keys in this database), DROP OWNED drops the keys,
 * REASSIGN OWNED drops them too (below).
 */
CREATE TABLE @extschema@._access_key_owners ();
REVOKE ALL ON @extschema@._access_key_owners FROM PUBLIC;
COMMENT ON TABLE @extschema@._access_key_owners IS 'always empty: the roles holding access keys hold SELECT on it, so PostgreSQL refuses to drop them';
COMMENT ON FUNCTION @extschema@._owner_ref_acl(oid, text, boolean) IS 'grant or revoke SELECT on queue._consumer_owners, _subscription_owners or _access_key_owners, never as an initial privilege';

/*
 * 1.3.1's body with a third kind, 'access_key', and its table locked with
 * the other two (one order for all).
 */
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
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.oid = role) THEN
		RETURN;					/* dropped before 1.3.1: nothing left to protect */
	END IF;
	LOCK TABLE @extschema@._consumer_owners, @extschema@._subscription_owners,
		@extschema@._access_key_owners IN SHARE ROW EXCLUSIVE MODE;
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
COMMENT ON FUNCTION @extschema@._sync_owner_ref(oid, text) IS 'grant or revoke a role SELECT on queue._consumer_owners, _subscription_owners or _access_key_owners as it owns consumers, subscriptions or access keys';

/* Every change of a key's role, however made (an API call, DROP OWNED). */
CREATE FUNCTION @extschema@._access_key_owner_trigger()
	RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
	SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	IF TG_OP IN ('INSERT', 'UPDATE') THEN
		PERFORM @extschema@._sync_owner_ref(NEW.role::oid, 'access_key');
	END IF;
	IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND OLD.role::oid <> NEW.role::oid) THEN
		PERFORM @extschema@._sync_owner_ref(OLD.role::oid, 'access_key');
	END IF;
	RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION @extschema@._access_key_owner_trigger() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@._access_key_owner_trigger() IS 'keep the grants on queue._access_key_owners in step with the roles of access keys';
CREATE TRIGGER owner_ref AFTER INSERT OR DELETE OR UPDATE OF role ON @extschema@._access_keys
	FOR EACH ROW EXECUTE FUNCTION @extschema@._access_key_owner_trigger();

/* DROP OWNED BY roles: 1.3.1's body, and the roles' access keys go too. */
CREATE OR REPLACE FUNCTION @extschema@._drop_owned_refs(roles oid[])
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
	DELETE FROM @extschema@._access_keys k WHERE k.role::oid = ANY (roles);
END
$$;
COMMENT ON FUNCTION @extschema@._drop_owned_refs(oid[]) IS 'DROP OWNED: drop the consumers, subscriptions and access keys of these roles';

/*
 * REASSIGN OWNED BY roles TO new_owner: 1.3.1's body (their consumers and
 * subscriptions become new_owner's), and their access keys are dropped,
 * not moved.  A key is a credential of its role: moved, it would give
 * whoever holds it new_owner's rights, which new_owner never handed out.
 */
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
END
$$;
COMMENT ON FUNCTION @extschema@._reassign_owned_refs(oid[], oid) IS 'REASSIGN OWNED: give the consumers and subscriptions of these roles to new_owner, drop their access keys';
COMMENT ON FUNCTION @extschema@._drop_owned_trigger() IS 'DROP OWNED: drop the consumers, subscriptions and access keys of its roles';


/* ------------------------------------------------------------------------
 * Message move tasks of the SQS endpoint (Start/List/CancelMessageMoveTask;
 * src/sqs/actions.c writes them as its superuser)
 * ------------------------------------------------------------------------
 */
CREATE TABLE @extschema@._move_tasks (
	task_handle text PRIMARY KEY,
	source_queue text NOT NULL,
	destination_queue text,
	status text NOT NULL,
	moved bigint NOT NULL DEFAULT 0,
	to_move bigint,
	started_at timestamptz NOT NULL,
	failure_reason text
);
REVOKE ALL ON @extschema@._move_tasks FROM PUBLIC;
COMMENT ON TABLE @extschema@._move_tasks IS 'message move tasks of the SQS endpoint (not dumped: a task does not outlive its cluster)';
