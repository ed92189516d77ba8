-- roles: owners and grantees are roles, as for tables (DESIGN.md "Access").
-- DROP ROLE is refused while a role owns a queue or holds a grant;
-- REASSIGN OWNED moves queues, DROP OWNED drops them and takes grants
-- away; a role named "Public" is not PUBLIC; the admin views show a role
-- only the queues it holds a privilege on, and their helper functions
-- refuse the others.  Roles are cluster-wide: all are queue_test_roles_*
-- and dropped at the end.  Output is booleans, counts and SQLSTATEs.
CREATE EXTENSION IF NOT EXISTS queue;
-- The dedicated layout, whatever queue.default_storage the suite runs with:
-- it drops a queue's own table behind the extension's back; storage.sql covers a shared queue's roles.
SET queue.default_storage = dedicated;
SET client_min_messages = warning;

CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, 'queue id \d+', 'queue id N');
END
$$;

CREATE ROLE queue_test_roles_a;
CREATE ROLE queue_test_roles_b;
CREATE ROLE queue_test_roles_c;
CREATE ROLE "Public";
GRANT USAGE ON SCHEMA queue TO queue_test_roles_a, queue_test_roles_b, queue_test_roles_c, "Public";
DO $$
BEGIN
	EXECUTE format('GRANT CREATE ON DATABASE %I TO queue_test_roles_a, queue_test_roles_c', current_database());
END
$$;

SET ROLE queue_test_roles_a;
SELECT queue.create('roles_dlq') > 0 AS created;
SELECT queue.create('roles_q', dead_letter_queue => 'roles_dlq', max_receive_count => 3) > 0 AS created;
SELECT queue.create('roles_fifo', fifo => true) > 0 AS created;
SELECT count(*) FROM queue.send('roles_q', 'one');
SELECT count(*) FROM queue.send('roles_fifo', 'f1', message_group_id => 'g', deduplication_id => 'd1');
SELECT queue.grant('roles_q', 'queue_test_roles_b', '{send, receive}');
RESET ROLE;

----------------------------------------------------------------------
-- the admin views show a role its own queues only
----------------------------------------------------------------------
SELECT queue_name, owner FROM queue.queues WHERE queue_name LIKE 'roles%' ORDER BY 1;
SET ROLE queue_test_roles_b;
SELECT queue_name, owner FROM queue.queues ORDER BY 1;
SELECT queue_name, visible FROM queue.stats ORDER BY 1;
RESET ROLE;
SET ROLE queue_test_roles_c;
SELECT count(*) AS queues_seen FROM queue.queues;
SELECT count(*) AS stats_seen FROM queue.stats;
RESET ROLE;
-- the views' helpers refuse a queue the caller holds nothing on
SELECT queue_id AS roles_q_id FROM queue._queues WHERE queue_name = 'roles_q' \gset
SET ROLE queue_test_roles_c;
SELECT pg_temp.err(format('SELECT * FROM queue._depth_checked(%s, ''1 day'')', :roles_q_id)) AS depth;
SELECT pg_temp.err(format('SELECT * FROM queue._counters(%s)', :roles_q_id)) AS counters;
SELECT pg_temp.err(format('SELECT * FROM queue._depth(%s, ''1 day'')', :roles_q_id)) AS depth_definer;
SELECT queue._may_see(:roles_q_id) AS may_see;
RESET ROLE;
SET ROLE queue_test_roles_b;
SELECT queue._may_see(:roles_q_id) AS may_see;
RESET ROLE;

----------------------------------------------------------------------
-- DROP ROLE is refused while the role owns a queue or holds a grant
----------------------------------------------------------------------
SELECT pg_temp.err('DROP ROLE queue_test_roles_a') ~ '^2BP01' AS owner_drop_refused;
SELECT pg_temp.err('DROP ROLE queue_test_roles_b') ~ '^2BP01' AS grantee_drop_refused;
SELECT count(*) AS queues FROM queue.queues WHERE queue_name LIKE 'roles%';

----------------------------------------------------------------------
-- a role named "Public" is that role; 'public' (no such role can exist)
-- is PUBLIC; a double-quoted name is always a role
----------------------------------------------------------------------
SELECT queue.grant('roles_q', 'Public', '{send}');
SELECT pg_temp.err($$SET LOCAL ROLE "Public"; SELECT queue.send('roles_q', 'x')$$) AS public_role_sends,
	   pg_temp.err($$SET LOCAL ROLE queue_test_roles_c; SELECT queue.send('roles_q', 'x')$$) ~ '^42501' AS others_refused;
SELECT queue.revoke('roles_q', '"Public"', '{send}');
SELECT pg_temp.err($$SET LOCAL ROLE "Public"; SELECT queue.send('roles_q', 'x')$$) ~ '^42501' AS public_role_revoked;
SELECT queue.grant('roles_q', 'PUBLIC', '{send}');
SELECT pg_temp.err($$SET LOCAL ROLE queue_test_roles_c; SELECT queue.send('roles_q', 'x')$$) AS everyone_sends;
SELECT queue.revoke('roles_q', 'public', '{send}');
SELECT pg_temp.err($$SET LOCAL ROLE queue_test_roles_c; SELECT queue.send('roles_q', 'x')$$) ~ '^42501' AS everyone_revoked;
SELECT pg_temp.err($$SELECT queue.grant('roles_q', '"public"', '{send}')$$) AS quoted_public;

----------------------------------------------------------------------
-- REASSIGN OWNED moves queues; DROP OWNED takes grants away and drops
-- the role's queues (their sources lose them as dead-letter queue)
----------------------------------------------------------------------
REASSIGN OWNED BY queue_test_roles_a TO queue_test_roles_c;
SELECT queue_name, owner FROM queue.queues WHERE queue_name LIKE 'roles%' ORDER BY 1;
SET ROLE queue_test_roles_c;
SELECT count(*) FROM queue.send('roles_q', 'two');
SELECT pg_temp.err($$SELECT queue.alter('roles_q', visibility_timeout => '1 minute')$$) AS new_owner_manages;
RESET ROLE;
SET ROLE queue_test_roles_a;
SELECT pg_temp.err($$SELECT queue.send('roles_q', 'x')$$) ~ '^42501' AS old_owner_refused;
RESET ROLE;
SET ROLE queue_test_roles_b;
SELECT count(*) FROM queue.send('roles_q', 'from b');
RESET ROLE;
DROP OWNED BY queue_test_roles_b;
SELECT pg_temp.err($$SET LOCAL ROLE queue_test_roles_b; SELECT queue.send('roles_q', 'x')$$) ~ '^42501' AS grantee_revoked;
DROP ROLE queue_test_roles_b;
-- roles_q keeps its messages
SELECT count(*) AS messages FROM queue.peek('roles_q', 100);
SELECT queue_id AS roles_fifo_id FROM queue._queues WHERE queue_name = 'roles_fifo' \gset
-- the owner's DROP OWNED drops its queues whole: registry rows, every
-- table, and the dead-letter link of a source it did not own
SET ROLE queue_test_roles_c;
SELECT queue.create('roles_c_dlq') > 0 AS created;
RESET ROLE;
SELECT queue.create('roles_super_src', dead_letter_queue => 'roles_c_dlq', max_receive_count => 2) > 0 AS created;
DROP OWNED BY queue_test_roles_c;
SELECT queue_name, dead_letter_queue, max_receive_count FROM queue.queues WHERE queue_name LIKE 'roles%' ORDER BY 1;
SELECT count(*) AS tables_left FROM pg_class
WHERE relnamespace = 'queue_data'::regnamespace
  AND relname IN ('q' || :roles_q_id, 'd' || :roles_q_id, 'a' || :roles_q_id,
				  'q' || :roles_fifo_id, 'd' || :roles_fifo_id, 'a' || :roles_fifo_id, 'g' || :roles_fifo_id);
SELECT pg_temp.err($$SELECT queue.send('roles_q', 'x')$$) AS send_to_dropped;
SELECT count(*) FROM queue.send('roles_super_src', 'still works');
DROP ROLE queue_test_roles_c;
-- a queue dropped by DROP TABLE of its message table (a superuser's
-- mistake) is forgotten whole too, and the name can be used again
SELECT queue_id AS src_id FROM queue._queues WHERE queue_name = 'roles_super_src' \gset
SELECT pg_temp.err(format('DROP TABLE queue_data.q%s', :src_id)) AS dropped;
SELECT count(*) AS registry_rows FROM queue._queues WHERE queue_name = 'roles_super_src';
SELECT count(*) AS tables_left FROM pg_class
WHERE relnamespace = 'queue_data'::regnamespace AND relname IN ('d' || :src_id, 'a' || :src_id);
SELECT queue.create('roles_super_src') > :src_id AS recreated_with_new_id;
SELECT queue.drop('roles_super_src');

----------------------------------------------------------------------
-- bounds of tags and redrive_allow; redrive_allow back to any source
----------------------------------------------------------------------
SELECT pg_temp.err($$SELECT queue.create('roles_b1', tags => (SELECT jsonb_object_agg('k' || i, i) FROM generate_series(1, 51) i))$$) AS tags_51;
SELECT pg_temp.err($$SELECT queue.create('roles_b1', tags => jsonb_build_object(repeat('k', 129), 1))$$) AS tag_key_129;
SELECT pg_temp.err($$SELECT queue.create('roles_b1', tags => jsonb_build_object('k', repeat('v', 257)))$$) AS tag_value_257;
SELECT pg_temp.err($$SELECT queue.create('roles_b1', tags => '{"": 1}')$$) AS tag_key_empty;
SELECT pg_temp.err($$SELECT queue.create('roles_b1', redrive_allow => (SELECT array_agg('s' || i) FROM generate_series(1, 11) i))$$) AS redrive_allow_11;
SELECT count(*) AS created FROM queue.queues WHERE queue_name = 'roles_b1';
SELECT queue.create('roles_b1', tags => (SELECT jsonb_object_agg('k' || i, repeat('v', 256)) FROM generate_series(1, 50) i),
					redrive_allow => (SELECT array_agg('s' || i) FROM generate_series(1, 10) i)) > 0 AS created;
SELECT queue.alter('roles_b1', redrive_allow => '{}');
SELECT redrive_allow FROM queue.queues WHERE queue_name = 'roles_b1';
SELECT queue.alter('roles_b1', redrive_allow => '{*}');
SELECT redrive_allow IS NULL AS any_source FROM queue.queues WHERE queue_name = 'roles_b1';
SELECT queue.alter('roles_b1', tags => '{"a": "b"}');
SELECT redrive_allow IS NULL AS still_any_source, tags FROM queue.queues WHERE queue_name = 'roles_b1';
SELECT pg_temp.err($$SELECT queue.alter('roles_b1', redrive_allow => '{*, x}')$$) AS star_with_others;
SELECT queue.drop('roles_b1');

DROP OWNED BY queue_test_roles_a, "Public";
DROP ROLE queue_test_roles_a;
DROP ROLE "Public";
