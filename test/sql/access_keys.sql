-- access_keys: the SQS endpoint's access keys (DESIGN.md "SQS API", Keys).
-- Only a superuser or the role itself creates or drops a role's keys;
-- generated keys look like AWS's; a given pair is kept, the same call again
-- returns it, any other use of its id is 42710; the secret is stored
-- encrypted and only a superuser reads it (queue._access_key_secret); the
-- view never shows it and shows a role its own keys only; a role holding a
-- key cannot be dropped until DROP OWNED (REASSIGN OWNED drops its keys).
-- Roles are queue_test_ak_* and dropped here.  Output is booleans, counts,
-- given ids and SQLSTATEs with their messages, never generated values.
CREATE EXTENSION IF NOT EXISTS queue;
SET client_min_messages = warning;

-- err(sql): "SQLSTATE: message" and the detail, or 'ok'.
CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	detail text;
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
	RETURN SQLSTATE || ': ' || SQLERRM || coalesce(E'\nDETAIL: ' || nullif(detail, ''), '');
END
$$;

CREATE ROLE queue_test_ak_alice;
CREATE ROLE queue_test_ak_bob;
CREATE ROLE queue_test_ak_carol;
GRANT USAGE ON SCHEMA queue TO queue_test_ak_alice, queue_test_ak_bob, queue_test_ak_carol;

----------------------------------------------------------------------
-- a superuser makes keys for a role: generated, AWS's formats
CREATE TEMP TABLE gen AS
	SELECT * FROM queue.create_access_key('queue_test_ak_alice')
	UNION ALL SELECT * FROM queue.create_access_key('queue_test_ak_alice');
SELECT access_key_id ~ '^AKIA[A-Z2-7]{16}$' AS id_format,
	   secret_access_key ~ '^[A-Za-z0-9+/]{40}$' AS secret_format
FROM gen;
SELECT count(DISTINCT access_key_id) AS ids, count(DISTINCT secret_access_key) AS secrets FROM gen;
-- an id given without a secret: the secret is generated
SELECT access_key_id, secret_access_key ~ '^[A-Za-z0-9+/]{40}$' AS secret_format
FROM queue.create_access_key('queue_test_ak_alice', 'alice-generated-secret');

-- a given pair is kept and returned; the same call again returns it
SELECT * FROM queue.create_access_key('queue_test_ak_alice', 'AKIAALICE0000000001', 'alice/secret+1=!~');
SELECT * FROM queue.create_access_key('queue_test_ak_alice', 'AKIAALICE0000000001', 'alice/secret+1=!~');
SELECT count(*) AS alice_key_rows FROM queue._access_keys WHERE access_key_id = 'AKIAALICE0000000001';

-- the role itself makes its own key; not another role's
SET ROLE queue_test_ak_bob;
SELECT * FROM queue.create_access_key('queue_test_ak_bob', 'bob_key.1', 'bob-secret');
SELECT * FROM queue.create_access_key('queue_test_ak_bob', 'bob_key.1', 'bob-secret');
SELECT pg_temp.err($$SELECT queue.create_access_key('queue_test_ak_alice')$$) AS bob_for_alice;
SELECT pg_temp.err($$SELECT queue.create_access_key('queue_test_ak_alice', 'bob-for-alice', 'x')$$) AS bob_for_alice_given;
-- nor read the table behind the view
SELECT pg_temp.err('SELECT * FROM queue._access_keys') AS bob_reads_table;
RESET ROLE;

----------------------------------------------------------------------
-- an existing id with another secret, another role, or no secret: 42710
SELECT pg_temp.err($$SELECT queue.create_access_key('queue_test_ak_alice', 'AKIAALICE0000000001', 'other')$$) AS other_secret;
SELECT pg_temp.err($$SELECT queue.create_access_key('queue_test_ak_bob', 'AKIAALICE0000000001', 'alice/secret+1=!~')$$) AS other_role;
SELECT pg_temp.err($$SELECT queue.create_access_key('queue_test_ak_alice', 'AKIAALICE0000000001')$$) AS no_secret;

-- bad ids, bad secrets, a secret without an id: 22023; NULL role: 22004
SELECT pg_temp.err($$SELECT queue.create_access_key('queue_test_ak_alice', '', 's')$$) AS empty_id;
SELECT pg_temp.err($$SELECT queue.create_access_key('queue_test_ak_alice', 'has space', 's')$$) AS space_id;
SELECT pg_temp.err($$SELECT queue.create_access_key('queue_test_ak_alice', 'k/1', 's')$$) AS slash_id;
SELECT pg_temp.err($$SELECT queue.create_access_key('queue_test_ak_alice', 'clé', 's')$$) AS non_ascii_id;
SELECT pg_temp.err(format('SELECT queue.create_access_key(%L, %L, %L)', 'queue_test_ak_alice', repeat('k', 129), 's')) AS long_id;
SELECT access_key_id = repeat('k', 128) AS longest_id_ok
FROM queue.create_access_key('queue_test_ak_alice', repeat('k', 128), repeat('s', 128));
SELECT pg_temp.err($$SELECT queue.create_access_key('queue_test_ak_alice', 'k2', '')$$) AS empty_secret;
SELECT pg_temp.err($$SELECT queue.create_access_key('queue_test_ak_alice', 'k2', 'has space')$$) AS space_secret;
SELECT pg_temp.err($$SELECT queue.create_access_key('queue_test_ak_alice', 'k2', E'tab\there')$$) AS tab_secret;
SELECT pg_temp.err($$SELECT queue.create_access_key('queue_test_ak_alice', 'k2', 'clé')$$) AS non_ascii_secret;
SELECT pg_temp.err(format('SELECT queue.create_access_key(%L, %L, %L)', 'queue_test_ak_alice', 'k2', repeat('s', 129))) AS long_secret;
SELECT pg_temp.err($$SELECT queue.create_access_key('queue_test_ak_alice', secret_access_key => 'x')$$) AS secret_without_id;
SELECT pg_temp.err($$SELECT queue.create_access_key(NULL)$$) AS null_role;
SELECT pg_temp.err($$SELECT queue.create_access_key(NULL, 'k3', 'x')$$) AS null_role_given;
SELECT count(*) AS refused_left_nothing FROM queue._access_keys WHERE access_key_id IN ('k2', 'k3', 'bob-for-alice');

-- a read-only transaction makes no key (25006)
BEGIN READ ONLY;
SELECT pg_temp.err($$SELECT queue.create_access_key('queue_test_ak_alice', 'k4', 'x')$$) AS read_only;
ROLLBACK;

----------------------------------------------------------------------
-- the secret is not stored in clear: neither the given nor a generated one
SELECT count(*) AS clear_secrets
FROM queue._access_keys k,
	 (SELECT secret_access_key FROM gen UNION ALL VALUES ('alice/secret+1=!~'), ('bob-secret'),
	  (repeat('s', 128))) s(v)
WHERE position(convert_to(s.v, 'UTF8') in k.secret) > 0;
SELECT count(*) AS stored, count(*) FILTER (WHERE length(nonce) = 16) AS with_nonce,
	   count(DISTINCT nonce) AS distinct_nonces
FROM queue._access_keys;
-- the same secret under two ids encrypts differently
SELECT * FROM queue.create_access_key('queue_test_ak_carol', 'carol-1', 'same-secret');
SELECT * FROM queue.create_access_key('queue_test_ak_carol', 'carol-2', 'same-secret');
SELECT count(DISTINCT secret) AS distinct_ciphertexts FROM queue._access_keys
WHERE access_key_id IN ('carol-1', 'carol-2');

----------------------------------------------------------------------
-- the view: no secret column; a role sees the keys of its own roles, a
-- superuser all
SELECT attname FROM pg_attribute WHERE attrelid = 'queue.access_keys'::regclass AND attnum > 0
ORDER BY attnum;
SELECT count(*) AS all_keys, count(*) FILTER (WHERE last_used_at IS NULL) AS never_used,
	   count(*) FILTER (WHERE created_at <= now()) AS created
FROM queue.access_keys;
SET ROLE queue_test_ak_bob;
SELECT access_key_id, role FROM queue.access_keys ORDER BY 1;
RESET ROLE;
SET ROLE queue_test_ak_alice;
SELECT CASE WHEN access_key_id ~ '^AKIA[A-Z2-7]{16}$' THEN 'generated'
			WHEN length(access_key_id) = 128 THEN 'k x 128' ELSE access_key_id END AS key,
	   role
FROM queue.access_keys ORDER BY 1;
RESET ROLE;
-- a member of a role sees that role's keys
GRANT queue_test_ak_carol TO queue_test_ak_bob;
SET ROLE queue_test_ak_bob;
SELECT access_key_id, role FROM queue.access_keys ORDER BY 1;
RESET ROLE;
REVOKE queue_test_ak_carol FROM queue_test_ak_bob;

----------------------------------------------------------------------
-- queue._access_key_secret: superusers only; the role and the secret
SET ROLE queue_test_ak_alice;
SELECT pg_temp.err($$SELECT * FROM queue._access_key_secret('AKIAALICE0000000001')$$) AS alice_reads_secret;
RESET ROLE;
SELECT role::regrole, secret FROM queue._access_key_secret('AKIAALICE0000000001');
SELECT role::regrole, secret FROM queue._access_key_secret('bob_key.1');
SELECT count(*) AS generated_secrets_match
FROM gen, queue._access_key_secret(gen.access_key_id) s
WHERE s.secret = gen.secret_access_key AND s.role = 'queue_test_ak_alice'::regrole;
SELECT s.secret = repeat('s', 128) AS longest_secret_back FROM queue._access_key_secret(repeat('k', 128)) s;
SELECT count(*) AS unknown FROM queue._access_key_secret('AKIANOSUCHKEY');
SELECT count(*) AS null_id FROM queue._access_key_secret(NULL);
SELECT count(*) AS too_long FROM queue._access_key_secret(repeat('k', 200));
-- its use is noted, at most once a minute
SELECT last_used_at IS NOT NULL AS used FROM queue.access_keys WHERE access_key_id = 'AKIAALICE0000000001';
SELECT last_used_at IS NULL AS unused FROM queue.access_keys WHERE access_key_id = 'carol-1';
CREATE TEMP TABLE used AS
	SELECT last_used_at FROM queue._access_keys WHERE access_key_id = 'AKIAALICE0000000001';
SELECT count(*) FROM queue._access_key_secret('AKIAALICE0000000001');
SELECT k.last_used_at = u.last_used_at AS not_written_again
FROM queue._access_keys k, used u WHERE k.access_key_id = 'AKIAALICE0000000001';
UPDATE queue._access_keys SET last_used_at = now() - interval '2 minutes'
WHERE access_key_id = 'AKIAALICE0000000001';
SELECT count(*) FROM queue._access_key_secret('AKIAALICE0000000001');
SELECT k.last_used_at > now() - interval '1 minute' AS written_after_a_minute
FROM queue._access_keys k WHERE k.access_key_id = 'AKIAALICE0000000001';
-- a read-only transaction reads it, and writes nothing
BEGIN READ ONLY;
SELECT secret FROM queue._access_key_secret('carol-1');
COMMIT;
SELECT last_used_at IS NULL AS still_unused FROM queue.access_keys WHERE access_key_id = 'carol-1';

----------------------------------------------------------------------
-- drop_access_key: the key's role or a superuser; false when there is none
SELECT queue.drop_access_key(access_key_id) FROM gen;
SET ROLE queue_test_ak_bob;
SELECT pg_temp.err($$SELECT queue.drop_access_key('AKIAALICE0000000001')$$) AS bob_drops_alices;
SELECT queue.drop_access_key('bob_key.1') AS bob_drops_his;
SELECT queue.drop_access_key('bob_key.1') AS again;
SELECT queue.drop_access_key('AKIANOSUCHKEY') AS unknown;
SELECT pg_temp.err($$SELECT queue.drop_access_key(NULL)$$) AS null_id;
SELECT * FROM queue.create_access_key('queue_test_ak_bob', 'bob_key.2', 'bob-secret-2');
RESET ROLE;
SELECT queue.drop_access_key('alice-generated-secret') AS superuser_drops;
SELECT queue.drop_access_key(repeat('k', 128)) AS superuser_drops_longest;
SELECT access_key_id, role FROM queue.access_keys ORDER BY 1;

----------------------------------------------------------------------
-- a role holding a key cannot be dropped (2BP01, naming its keys) ...
REVOKE USAGE ON SCHEMA queue FROM queue_test_ak_alice, queue_test_ak_bob, queue_test_ak_carol;
SELECT pg_temp.err('DROP ROLE queue_test_ak_alice') AS drop_alice;
SELECT pg_temp.err('DROP ROLE queue_test_ak_carol') AS drop_carol;
SELECT grantee::regrole FROM pg_class c, aclexplode(c.relacl) x
WHERE c.oid = 'queue._access_key_owners'::regclass AND x.grantee <> c.relowner ORDER BY 1;
-- ... DROP OWNED drops its keys, and then it drops
DROP OWNED BY queue_test_ak_alice;
SELECT count(*) AS alice_keys FROM queue._access_keys WHERE role = 'queue_test_ak_alice'::regrole;
SELECT pg_temp.err('DROP ROLE queue_test_ak_alice') AS drop_alice_after_drop_owned;
-- REASSIGN OWNED drops the keys (a credential does not change hands)
REASSIGN OWNED BY queue_test_ak_bob TO queue_test_ak_carol;
SELECT access_key_id, role FROM queue.access_keys ORDER BY 1;
SELECT pg_temp.err('DROP ROLE queue_test_ak_bob') AS drop_bob_after_reassign;
-- the last key dropped, the role drops
SELECT queue.drop_access_key('carol-1'), queue.drop_access_key('carol-2');
SELECT pg_temp.err('DROP ROLE queue_test_ak_carol') AS drop_carol_after;
SELECT count(*) AS keys_left FROM queue._access_keys;
-- a GRANT on queue._access_key_owners to a role without a key (a
-- restore's: the grants are dumped, the keys are not) is taken back at once
CREATE ROLE queue_test_ak_restored;
GRANT SELECT ON queue._access_key_owners TO queue_test_ak_restored;
SELECT count(*) AS restored_grant FROM pg_class c, aclexplode(c.relacl) x
WHERE c.oid = 'queue._access_key_owners'::regclass AND x.grantee = 'queue_test_ak_restored'::regrole;
SELECT pg_temp.err('DROP ROLE queue_test_ak_restored') AS drop_restored;
SELECT count(*) AS grants_left FROM pg_class c, aclexplode(c.relacl) x
WHERE c.oid = 'queue._access_key_owners'::regclass AND x.grantee <> c.relowner;
SELECT count(*) AS roles_left FROM pg_roles WHERE rolname LIKE 'queue_test_ak%';
