-- access: who may call what.  Every API function against every privilege
-- (send; receive: receive, delete, change_visibility; manage: alter, purge,
-- drop, peek, redrive, grant, revoke), the owner and superusers holding all,
-- grants to PUBLIC, revokes seen at once by other sessions, refused calls
-- changing nothing, CREATE on the database to create, the creating role as
-- owner, the tables and internal functions closed to other roles, and a
-- hostile search_path and traps in pg_temp that change nothing.  Roles are
-- cluster-wide, so every role made here is named queue_test_* and dropped
-- at the end.
-- Output is booleans, counts and SQLSTATEs, never ids or receipts.
CREATE EXTENSION IF NOT EXISTS queue;
-- The dedicated layout, whatever queue.default_storage the suite runs with:
-- it reads the grants a dedicated queue keeps in its table's ACL; storage.sql checks a shared queue's.
SET queue.default_storage = dedicated;
-- a second session, to see a revoke from elsewhere
CREATE EXTENSION IF NOT EXISTS dblink;
SET client_min_messages = warning;

-- err(sql): run a statement, show "SQLSTATE: message" instead of failing.
CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, 'message \d+', 'message N', 'g');
END
$$;
-- as_role(role, sql): run a statement as role (NULL: as ourselves, a
-- superuser) and always roll it back, so the calls of a matrix do not add
-- up; 'ok', '42501', or the SQLSTATE and message of anything else.  The
-- SET LOCAL ROLE is undone with the rolled-back subtransaction.
CREATE FUNCTION pg_temp.as_role(role text, cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	IF role IS NOT NULL THEN
		EXECUTE format('SET LOCAL ROLE %I', role);
	END IF;
	EXECUTE cmd;
	RAISE SQLSTATE 'QTRY0';
EXCEPTION
	WHEN SQLSTATE 'QTRY0' THEN
		RETURN 'ok';
	WHEN insufficient_privilege THEN
		RETURN '42501';
	WHEN OTHERS THEN
		RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
-- grants(queue, table privilege): how many roles (PUBLIC counts as one)
-- other than the owner hold it in the ACL of the queue's message table,
-- where a queue's grants live (send INSERT, receive UPDATE, manage TRUNCATE).
CREATE FUNCTION pg_temp.grants(q text, priv text) RETURNS bigint LANGUAGE sql AS $$
	SELECT count(*) FROM queue._queues r
	JOIN pg_class c ON c.relnamespace = 'queue_data'::regnamespace AND c.relname = 'q' || r.queue_id,
	LATERAL aclexplode(c.relacl) a
	WHERE r.queue_name = q AND a.privilege_type = priv AND a.grantee <> c.relowner
$$;
-- messages(queue): what a refused or rolled-back call must not change:
-- messages, their receives and leases, the attributes and grants.
CREATE FUNCTION pg_temp.messages(q text) RETURNS text LANGUAGE sql AS $$
	SELECT format('messages=%s receives=%s visible=%s in_flight=%s delayed=%s vt=%s grants=%s/%s/%s',
				  (SELECT count(*) FROM queue.peek(q, 100000)),
				  (SELECT coalesce(sum(receive_count), 0) FROM queue.peek(q, 100000)),
				  s.visible, s.in_flight, s.delayed,
				  (SELECT visibility_timeout FROM queue.queues WHERE queue_name = q),
				  pg_temp.grants(q, 'INSERT'), pg_temp.grants(q, 'UPDATE'), pg_temp.grants(q, 'TRUNCATE'))
	FROM queue.stats s WHERE s.queue_name = q
$$;
-- state(queue): that and the committed counters.
CREATE FUNCTION pg_temp.state(q text) RETURNS text LANGUAGE sql AS $$
	SELECT format('%s sent=%s received=%s deleted=%s', pg_temp.messages(q), s.sent, s.received, s.deleted)
	FROM queue.stats s WHERE s.queue_name = q
$$;

----------------------------------------------------------------------
-- roles: an owner (with CREATE on the database), one role per privilege,
-- and one with nothing; all reach the API through USAGE on schema queue
----------------------------------------------------------------------
CREATE ROLE queue_test_owner;
CREATE ROLE queue_test_sender LOGIN;
CREATE ROLE queue_test_receiver LOGIN;
CREATE ROLE queue_test_manager;
CREATE ROLE queue_test_nobody;
-- members of the owner and of the sender, and a role without USAGE
CREATE ROLE queue_test_owner_member IN ROLE queue_test_owner;
CREATE ROLE queue_test_sender_member IN ROLE queue_test_sender;
CREATE ROLE queue_test_outsider;
GRANT USAGE ON SCHEMA queue TO queue_test_owner, queue_test_sender, queue_test_receiver,
	queue_test_manager, queue_test_nobody, queue_test_owner_member, queue_test_sender_member;
DO $$ BEGIN
	EXECUTE format('GRANT CREATE ON DATABASE %I TO queue_test_owner', current_database());
END $$;

----------------------------------------------------------------------
-- creating a queue needs CREATE on the database (42501 without), and the
-- creating role owns it, also under SET ROLE
----------------------------------------------------------------------
SET ROLE queue_test_nobody;
SELECT pg_temp.err($$SELECT queue.create('acl_nobody')$$);
SELECT pg_temp.err($$SELECT queue.create('acl_nobody', fifo => true)$$);
RESET ROLE;
SELECT count(*) FROM queue.queues WHERE queue_name = 'acl_nobody';
SET ROLE queue_test_owner;
SELECT queue.create('acl_q', visibility_timeout => '1 minute') > 0 AS created;
SELECT queue.create('acl_other') > 0 AS created;
SELECT queue.create('acl_dlq') > 0 AS created;
SELECT queue.alter('acl_q', dead_letter_queue => 'acl_dlq', max_receive_count => 1);
SELECT current_user, session_user = current_user AS same_as_session;
RESET ROLE;
-- a superuser's queue is its own
SELECT queue.create('acl_super') > 0 AS created;
SELECT queue_name, owner::text = current_user AS owned_by_superuser,
	   owner::text AS owner
FROM queue.queues WHERE queue_name LIKE 'acl%' ORDER BY queue_name;
-- a member of the owner role holds the owner's privileges, CREATE included
SET ROLE queue_test_owner_member;
SELECT queue.create('acl_member') > 0 AS created;
RESET ROLE;
SELECT owner FROM queue.queues WHERE queue_name = 'acl_member';
SELECT queue.drop('acl_member'), queue.drop('acl_super');
-- through a SECURITY DEFINER function the caller is its owner, as for any
-- PostgreSQL privilege
CREATE FUNCTION public.queue_test_create_as_owner(n text) RETURNS bigint
	LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog
	AS $$ SELECT queue.create(n) $$;
ALTER FUNCTION public.queue_test_create_as_owner(text) OWNER TO queue_test_owner;
SET ROLE queue_test_nobody;
SELECT public.queue_test_create_as_owner('acl_definer') > 0 AS created;
RESET ROLE;
SELECT owner FROM queue.queues WHERE queue_name = 'acl_definer';
SELECT queue.drop('acl_definer');
DROP FUNCTION public.queue_test_create_as_owner(text);

----------------------------------------------------------------------
-- the matrix: every function as the superuser, the owner, a member of the
-- owner, each privilege and nobody; each call rolled back
----------------------------------------------------------------------
SET ROLE queue_test_owner;
SELECT queue.grant('acl_q', 'queue_test_sender', '{send}');
SELECT queue.grant('acl_q', 'queue_test_receiver', '{receive}');
SELECT queue.grant('acl_q', 'queue_test_manager', '{manage}');
-- redrive to another queue needs send there too
SELECT queue.grant('acl_other', 'queue_test_manager', '{send}');
SELECT count(*) FROM queue.send_batch('acl_q', ARRAY['one', 'two', 'three']);
SELECT count(*) FROM queue.send('acl_q', 'later', delay => '1 hour');
SELECT receipt AS r FROM queue.receive('acl_q', visibility_timeout => '1 hour') \gset
RESET ROLE;
SELECT pg_temp.messages('acl_q') AS before_messages \gset
SELECT pg_temp.state('acl_q') AS before \gset
SELECT :'before' AS state;

CREATE TEMP TABLE acl_call (ord serial, fn text, needs text, sql text);
INSERT INTO acl_call (fn, needs, sql) VALUES
	('create', 'CREATE on db', $$SELECT queue.create('acl_new')$$),
	('create existing', 'CREATE on db', $$SELECT queue.create('acl_q', visibility_timeout => '1 minute', dead_letter_queue => 'acl_dlq', max_receive_count => 1)$$),
	('alter', 'manage', $$SELECT queue.alter('acl_q', visibility_timeout => '2 minutes')$$),
	('drop', 'manage', $$SELECT queue.drop('acl_q')$$),
	('drop if_exists', 'manage', $$SELECT queue.drop('acl_q', if_exists => true)$$),
	('purge', 'manage', $$SELECT queue.purge('acl_q')$$),
	('peek', 'manage', $$SELECT queue.peek('acl_q')$$),
	('redrive', 'manage', $$SELECT queue.redrive('acl_q')$$),
	('redrive to acl_other', 'manage+send', $$SELECT queue.redrive('acl_q', 'acl_other')$$),
	('grant', 'manage', $$SELECT queue.grant('acl_q', 'queue_test_nobody', '{send}')$$),
	('revoke', 'manage', $$SELECT queue.revoke('acl_q', 'queue_test_sender', '{send}')$$),
	('send', 'send', $$SELECT queue.send('acl_q', 'x')$$),
	('send jsonb', 'send', $$SELECT queue.send('acl_q', '{"x": 1}'::jsonb)$$),
	('send_batch', 'send', $$SELECT queue.send_batch('acl_q', ARRAY['x', 'y'])$$),
	('send_batch jsonb', 'send', $$SELECT queue.send_batch('acl_q', ARRAY['1', '2']::jsonb[])$$),
	('receive', 'receive', $$SELECT queue.receive('acl_q', 10)$$),
	('receive attempt', 'receive', $$SELECT queue.receive('acl_q', receive_attempt_id => 'attempt-1')$$),
	('delete', 'receive', format('SELECT queue.delete(%L, %L)', 'acl_q', :'r')),
	('delete_batch', 'receive', format('SELECT queue.delete_batch(%L, %L)', 'acl_q', ARRAY[:'r'])),
	('change_visibility', 'receive', format('SELECT queue.change_visibility(%L, %L, %L)', 'acl_q', :'r', '0')),
	('change_visibility_batch', 'receive', format('SELECT queue.change_visibility_batch(%L, %L, %L)', 'acl_q', ARRAY[:'r'], '0')),
	('view queues', 'USAGE', $$SELECT * FROM queue.queues$$),
	('view stats', 'USAGE', $$SELECT * FROM queue.stats$$);
GRANT SELECT ON acl_call TO PUBLIC;
SELECT fn, needs,
	   pg_temp.as_role(NULL, sql) AS superuser,
	   pg_temp.as_role('queue_test_owner', sql) AS owner,
	   pg_temp.as_role('queue_test_owner_member', sql) AS owner_member,
	   pg_temp.as_role('queue_test_sender', sql) AS sender,
	   pg_temp.as_role('queue_test_receiver', sql) AS receiver,
	   pg_temp.as_role('queue_test_manager', sql) AS manager,
	   pg_temp.as_role('queue_test_nobody', sql) AS nobody
FROM acl_call ORDER BY ord;
-- (the counters are left out here: a rolled-back queue.drop zeroes them,
-- which bad_input shows)
SELECT pg_temp.messages('acl_q') = :'before_messages' AS unchanged;
-- a member of a grantee holds what the grantee holds (USAGE of its own)
SELECT fn, pg_temp.as_role('queue_test_sender_member', sql) AS sender_member
FROM acl_call WHERE fn IN ('send', 'receive', 'peek') ORDER BY ord;
-- without USAGE on schema queue nothing is reachable, not even the views
SELECT fn, pg_temp.as_role('queue_test_outsider', sql) AS outsider
FROM acl_call WHERE fn IN ('create', 'send', 'receive', 'peek', 'view queues') ORDER BY ord;
-- the refusal names the queue and the privilege
SET ROLE queue_test_nobody;
SELECT pg_temp.err($$SELECT queue.send('acl_q', 'x')$$);
SELECT pg_temp.err($$SELECT queue.receive('acl_q')$$);
SELECT pg_temp.err($$SELECT queue.purge('acl_q')$$);
SELECT pg_temp.err($$SELECT queue.grant('acl_q', 'queue_test_nobody', '{send}')$$);
-- arguments that need no queue are checked first (no row is read for them);
-- a receipt needs the queue, so the privilege comes first
SELECT pg_temp.err($$SELECT queue.receive('acl_q', max_messages => 5000)$$);
SELECT pg_temp.err($$SELECT queue.delete('acl_q', 'forged')$$);
RESET ROLE;
-- rolled-back receives above count (failed.c): wait until the worker has
-- written them and moved the messages that used up max_receive_count, so
-- that below only the refused calls could change anything
DO $$
DECLARE
	id bigint := (SELECT queue_id FROM queue.queues WHERE queue_name = 'acl_q');
BEGIN
	FOR i IN 1 .. 600 LOOP
		EXIT WHEN queue._failed_pending(id) = 0 AND NOT EXISTS (
			SELECT 1 FROM queue.peek('acl_q', 1000) p
			WHERE p.receive_count >= 1 AND p.visible_at <= clock_timestamp());
		PERFORM pg_sleep(0.1);
	END LOOP;
END
$$;
-- refused calls committed (not rolled back by us): still nothing changed,
-- counters included
SELECT pg_temp.state('acl_q') AS before \gset
SET ROLE queue_test_nobody;
SELECT fn, pg_temp.err(sql) AS result FROM acl_call
WHERE needs NOT IN ('USAGE', 'CREATE on db') ORDER BY ord;
RESET ROLE;
SELECT pg_temp.state('acl_q') = :'before' AS unchanged;
SET ROLE queue_test_sender;
SELECT fn, left(pg_temp.err(sql), 5) AS result FROM acl_call
WHERE needs NOT IN ('USAGE', 'send') ORDER BY ord;
RESET ROLE;
SET ROLE queue_test_receiver;
SELECT fn, left(pg_temp.err(sql), 5) AS result FROM acl_call
WHERE needs NOT IN ('USAGE', 'receive') ORDER BY ord;
RESET ROLE;
SET ROLE queue_test_manager;
SELECT fn, left(pg_temp.err(sql), 5) AS result FROM acl_call
WHERE needs IN ('send', 'receive', 'CREATE on db') ORDER BY ord;
RESET ROLE;
SELECT pg_temp.state('acl_q') = :'before' AS unchanged;
-- grants are per queue: acl_q's grantees hold nothing on acl_dlq
SELECT r.rolname,
	   pg_temp.as_role(r.rolname, $$SELECT queue.send('acl_dlq', 'x')$$) AS send,
	   pg_temp.as_role(r.rolname, $$SELECT queue.receive('acl_dlq')$$) AS receive,
	   pg_temp.as_role(r.rolname, $$SELECT queue.peek('acl_dlq')$$) AS peek
FROM pg_roles r WHERE r.rolname IN ('queue_test_sender', 'queue_test_receiver', 'queue_test_manager')
ORDER BY 1;

----------------------------------------------------------------------
-- grants and revokes
----------------------------------------------------------------------
-- manage lets a role grant and revoke, any privilege, to anyone
SET ROLE queue_test_manager;
SELECT queue.grant('acl_q', 'queue_test_nobody', '{send, receive}');
RESET ROLE;
SELECT pg_temp.as_role('queue_test_nobody', $$SELECT queue.send('acl_q', 'x')$$) AS send,
	   pg_temp.as_role('queue_test_nobody', $$SELECT queue.receive('acl_q')$$) AS receive,
	   pg_temp.as_role('queue_test_nobody', $$SELECT queue.peek('acl_q')$$) AS peek;
SET ROLE queue_test_manager;
SELECT queue.revoke('acl_q', 'queue_test_nobody', '{send, receive}');
RESET ROLE;
SELECT pg_temp.as_role('queue_test_nobody', $$SELECT queue.send('acl_q', 'x')$$) AS send,
	   pg_temp.as_role('queue_test_nobody', $$SELECT queue.receive('acl_q')$$) AS receive;
-- granting twice is one grant; revoking what was never granted is fine;
-- revoking one privilege leaves the others
SELECT queue.grant('acl_q', 'queue_test_nobody', '{send}');
SELECT queue.grant('acl_q', 'queue_test_nobody', '{send, send}');
SELECT pg_temp.grants('acl_q', 'INSERT') AS send_grants;
SELECT queue.revoke('acl_q', 'queue_test_nobody', '{manage}');
SELECT queue.grant('acl_q', 'queue_test_nobody', '{receive}');
SELECT queue.revoke('acl_q', 'queue_test_nobody', '{send}');
SELECT pg_temp.as_role('queue_test_nobody', $$SELECT queue.send('acl_q', 'x')$$) AS send,
	   pg_temp.as_role('queue_test_nobody', $$SELECT queue.receive('acl_q')$$) AS receive;
SELECT queue.revoke('acl_q', 'queue_test_nobody', '{receive}');
-- the owner's privileges cannot be revoked
SELECT queue.revoke('acl_q', 'queue_test_owner', '{send, receive, manage}');
SELECT pg_temp.as_role('queue_test_owner', $$SELECT queue.send('acl_q', 'x')$$) AS send,
	   pg_temp.as_role('queue_test_owner', $$SELECT queue.purge('acl_q')$$) AS purge;
-- a manager who loses manage can no longer grant
SELECT queue.revoke('acl_q', 'queue_test_manager', '{manage}');
SELECT pg_temp.as_role('queue_test_manager', $$SELECT queue.grant('acl_q', 'queue_test_manager', '{manage}')$$) AS regrant;
SELECT queue.grant('acl_q', 'queue_test_manager', '{manage}');
SELECT pg_temp.state('acl_q') = :'before' AS unchanged;

----------------------------------------------------------------------
-- grants to PUBLIC: every role with USAGE holds them ('public' in any case)
----------------------------------------------------------------------
SELECT queue.grant('acl_q', 'public', '{send}');
SELECT r, pg_temp.as_role(r, $$SELECT queue.send('acl_q', 'x')$$) AS send,
	   pg_temp.as_role(r, $$SELECT queue.receive('acl_q')$$) AS receive
FROM unnest(ARRAY['queue_test_nobody', 'queue_test_receiver']) AS r ORDER BY r;
SELECT queue.grant('acl_q', 'PUBLIC', '{receive, manage}');
SELECT r, pg_temp.as_role(r, $$SELECT queue.receive('acl_q')$$) AS receive,
	   pg_temp.as_role(r, $$SELECT queue.purge('acl_q')$$) AS purge
FROM unnest(ARRAY['queue_test_nobody']) AS r;
SELECT queue.revoke('acl_q', 'Public', '{send, receive, manage}');
SELECT r, pg_temp.as_role(r, $$SELECT queue.send('acl_q', 'x')$$) AS send,
	   pg_temp.as_role(r, $$SELECT queue.receive('acl_q')$$) AS receive,
	   pg_temp.as_role(r, $$SELECT queue.purge('acl_q')$$) AS purge
FROM unnest(ARRAY['queue_test_nobody']) AS r;
-- revoking from PUBLIC leaves a role's own grant
SELECT pg_temp.as_role('queue_test_sender', $$SELECT queue.send('acl_q', 'x')$$) AS sender_send;
-- the grants are the table's ACL entries, one per role
SELECT pg_temp.grants('acl_q', 'INSERT') AS send, pg_temp.grants('acl_q', 'UPDATE') AS receive,
	   pg_temp.grants('acl_q', 'TRUNCATE') AS manage;
SELECT pg_temp.state('acl_q') = :'before' AS unchanged;

----------------------------------------------------------------------
-- a revoke takes effect at once: in this session after SET ROLE, and in
-- another session that has the queue cached
----------------------------------------------------------------------
SET ROLE queue_test_sender;
SELECT count(*) FROM queue.send('acl_q', 'cached');
RESET ROLE;
SELECT queue.revoke('acl_q', 'queue_test_sender', '{send}');
SET ROLE queue_test_sender;
SELECT pg_temp.err($$SELECT queue.send('acl_q', 'after revoke')$$);
RESET ROLE;
SELECT queue.grant('acl_q', 'queue_test_sender', '{send}');
SET ROLE queue_test_sender;
SELECT count(*) FROM queue.send('acl_q', 'granted again');
RESET ROLE;
-- the other session, as the sender and as the receiver
SELECT dblink_connect('acl_sender', format('host=%s port=%s dbname=%s user=queue_test_sender',
	trim(split_part(current_setting('unix_socket_directories'), ',', 1)),
	current_setting('port'), current_database()));
SELECT dblink_connect('acl_receiver', format('host=%s port=%s dbname=%s user=queue_test_receiver',
	trim(split_part(current_setting('unix_socket_directories'), ',', 1)),
	current_setting('port'), current_database()));
SELECT * FROM dblink('acl_sender', $$SELECT count(*) FROM queue.send('acl_q', 'from the other session')$$) AS t(n bigint);
SELECT * FROM dblink('acl_receiver', $$SELECT count(*) FROM queue.receive('acl_q', visibility_timeout => '0')$$) AS t(n bigint);
SELECT queue.revoke('acl_q', 'queue_test_sender', '{send}');
SELECT queue.revoke('acl_q', 'queue_test_receiver', '{receive}');
SELECT pg_temp.err($$SELECT * FROM dblink('acl_sender', 'SELECT count(*) FROM queue.send(''acl_q'', ''x'')') AS t(n bigint)$$);
SELECT pg_temp.err($$SELECT * FROM dblink('acl_receiver', 'SELECT count(*) FROM queue.receive(''acl_q'')') AS t(n bigint)$$);
-- and a grant too
SELECT queue.grant('acl_q', 'queue_test_sender', '{send}');
-- a revoke is seen by the next statement of a transaction already open
-- there, one that has used the privilege
SELECT dblink_exec('acl_sender', 'BEGIN');
SELECT * FROM dblink('acl_sender', $$SELECT count(*) FROM queue.send('acl_q', 'in an open transaction')$$) AS t(n bigint);
SELECT queue.revoke('acl_q', 'queue_test_sender', '{send}');
SELECT pg_temp.err($$SELECT * FROM dblink('acl_sender', 'SELECT count(*) FROM queue.send(''acl_q'', ''x'')') AS t(n bigint)$$);
SELECT dblink_exec('acl_sender', 'ROLLBACK');
SELECT queue.grant('acl_q', 'queue_test_sender', '{send}');
SELECT queue.grant('acl_q', 'queue_test_receiver', '{receive}');
SELECT * FROM dblink('acl_sender', $$SELECT count(*) FROM queue.send('acl_q', 'x')$$) AS t(n bigint);
SELECT * FROM dblink('acl_receiver', $$SELECT count(*) FROM queue.receive('acl_q', visibility_timeout => '0')$$) AS t(n bigint);
-- a grant to PUBLIC and its revoke, seen by a session without its own grant
SELECT queue.revoke('acl_q', 'queue_test_receiver', '{receive}');
SELECT queue.grant('acl_q', 'public', '{receive}');
SELECT * FROM dblink('acl_receiver', $$SELECT count(*) FROM queue.receive('acl_q', visibility_timeout => '0')$$) AS t(n bigint);
SELECT queue.revoke('acl_q', 'public', '{receive}');
SELECT pg_temp.err($$SELECT * FROM dblink('acl_receiver', 'SELECT count(*) FROM queue.receive(''acl_q'')') AS t(n bigint)$$);
-- dropping the queue is seen too: 42704, not a stale cache
SELECT queue.grant('acl_other', 'queue_test_sender', '{send}');
SELECT * FROM dblink('acl_sender', $$SELECT count(*) FROM queue.send('acl_other', 'x')$$) AS t(n bigint);
SELECT queue.drop('acl_other');
SELECT pg_temp.err($$SELECT * FROM dblink('acl_sender', 'SELECT count(*) FROM queue.send(''acl_other'', ''x'')') AS t(n bigint)$$);
-- a new queue of the same name owes nothing to the old one's grants
SELECT queue.create('acl_other') > 0 AS created;
SELECT pg_temp.err($$SELECT * FROM dblink('acl_sender', 'SELECT count(*) FROM queue.send(''acl_other'', ''x'')') AS t(n bigint)$$);
SELECT dblink_disconnect('acl_sender'), dblink_disconnect('acl_receiver');
SELECT queue.grant('acl_q', 'queue_test_receiver', '{receive}');

----------------------------------------------------------------------
-- naming a dead-letter queue moves messages into it, so it needs the send
-- privilege there: otherwise a role could fill any queue it may not send
-- to with dead letters of its own queue
----------------------------------------------------------------------
SET ROLE queue_test_owner;
SELECT queue.create('acl_victim') > 0 AS created;
RESET ROLE;
SELECT queue.grant('acl_other', 'queue_test_manager', '{send}');
DO $$ BEGIN
	EXECUTE format('GRANT CREATE ON DATABASE %I TO queue_test_nobody', current_database());
END $$;
SELECT pg_temp.as_role('queue_test_nobody', $$SELECT queue.create('acl_attacker')$$) AS create_plain,
	   pg_temp.as_role('queue_test_nobody', $$SELECT queue.send('acl_victim', 'x')$$) AS send_victim,
	   pg_temp.as_role('queue_test_nobody', $$SELECT queue.create('acl_attacker', dead_letter_queue => 'acl_victim', max_receive_count => 1)$$) AS create_dlq_victim;
SELECT pg_temp.as_role('queue_test_manager', $$SELECT queue.alter('acl_q', dead_letter_queue => 'acl_victim')$$) AS alter_dlq_victim,
	   pg_temp.as_role('queue_test_manager', $$SELECT queue.alter('acl_q', dead_letter_queue => 'acl_other')$$) AS alter_dlq_sendable;
-- the attempt, committed: the victim's queue stays empty
SET ROLE queue_test_nobody;
SELECT left(pg_temp.err($$SELECT queue.create('acl_attacker', dead_letter_queue => 'acl_victim', max_receive_count => 1)$$), 5) AS create;
SELECT pg_temp.err($$SELECT queue.send('acl_attacker', 'injected')$$) IN ('ok', '42704: queue "acl_attacker" does not exist') AS send;
SELECT pg_temp.err($$SELECT queue.receive('acl_attacker', visibility_timeout => '0')$$) IN ('ok', '42704: queue "acl_attacker" does not exist') AS receive;
SELECT pg_temp.err($$SELECT queue.receive('acl_attacker')$$) IN ('ok', '42704: queue "acl_attacker" does not exist') AS receive;
RESET ROLE;
SELECT count(*) AS victim_messages FROM queue.peek('acl_victim');
SELECT queue.drop('acl_attacker', if_exists => true) IS NOT NULL AS cleaned;
DO $$ BEGIN
	EXECUTE format('REVOKE CREATE ON DATABASE %I FROM queue_test_nobody', current_database());
END $$;
SELECT queue.drop('acl_victim');

----------------------------------------------------------------------
-- the tables behind queues: no other role reads or writes them, even with
-- USAGE on queue_data (a DBA's slip); internal functions are not callable
----------------------------------------------------------------------
SELECT queue_id AS qid FROM queue.queues WHERE queue_name = 'acl_q' \gset
CREATE TEMP TABLE acl_table (ord serial, label text, sql text);
INSERT INTO acl_table (label, sql) VALUES
	('select queue._queues', $$SELECT * FROM queue._queues$$),
	('insert queue._queues', $$INSERT INTO queue._queues (queue_name, fifo, visibility_timeout, delay, retention, max_message_size, receive_wait, content_based_deduplication, deduplication_window, deduplication_scope, tags) VALUES ('evil', false, '1s', '0', '1 day', 1, '0', false, '5 min', 'queue', '{}')$$),
	('update queue._queues', $$UPDATE queue._queues SET max_message_size = 1$$),
	('delete queue._queues', $$DELETE FROM queue._queues$$),
	('select queue._secret', $$SELECT * FROM queue._secret$$),
	('insert queue._secret', $$INSERT INTO queue._secret VALUES ('\x00')$$),
	('update queue._secret', $$UPDATE queue._secret SET key = '\x00'$$),
	('delete queue._secret', $$DELETE FROM queue._secret$$),
	('select messages', format('SELECT * FROM queue_data.q%s', :qid)),
	('insert messages', format('INSERT INTO queue_data.q%s (message_id, visible_at, sent_at, body) VALUES (1, now(), now(), %L)', :qid, 'evil')),
	('update messages', format('UPDATE queue_data.q%s SET visible_at = now()', :qid)),
	('delete messages', format('DELETE FROM queue_data.q%s', :qid)),
	('truncate messages', format('TRUNCATE queue_data.q%s', :qid)),
	('select dedup ids', format('SELECT * FROM queue_data.d%s', :qid)),
	('delete dedup ids', format('DELETE FROM queue_data.d%s', :qid)),
	('select attempts', format('SELECT * FROM queue_data.a%s', :qid)),
	('nextval message ids', $$SELECT nextval('queue_data.message_id_seq')$$),
	('setval message ids', $$SELECT setval('queue_data.message_id_seq', 1)$$),
	('create in queue_data', $$CREATE TABLE queue_data.evil (x int)$$),
	('create in queue', $$CREATE TABLE queue.evil (x int)$$),
	('queue._create', $$SELECT queue._create('evil', false, '30s', '0', '4 days', 1024, '0', false, '5 min', 'queue', NULL, NULL, NULL, '0', '{}', 10)$$),
	('queue._create_attributes', $$SELECT queue._create_attributes('evil', false, '30s', '0', '4 days', 1024, '0', false, '5 min', 'queue', NULL, NULL, NULL, '{}', 10)$$),
	('queue._alter', $$SELECT queue._alter('acl_q', '1s', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 10)$$),
	('queue._alter_attributes', $$SELECT queue._alter_attributes('acl_q', '1s', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 10)$$),
	('queue._failed_pending', $$SELECT queue._failed_pending(1)$$),
	('queue._drop', $$SELECT queue._drop('acl_q', false, false, 10)$$),
	('queue._purge', $$SELECT queue._purge('acl_q', 10)$$),
	('queue._grant', $$SELECT queue._grant('acl_q', 'queue_test_nobody', '{send}', 10)$$),
	('queue._revoke', $$SELECT queue._revoke('acl_q', 'queue_test_sender', '{send}', 10)$$),
	('queue._grant_revoke', $$SELECT queue._grant_revoke('acl_q', 'queue_test_nobody', '{manage}', true, 10)$$),
	('queue._invalidate', $$SELECT queue._invalidate(0)$$),
	('queue._lookup', $$SELECT queue._lookup('acl_q')$$),
	('queue._check_manage', $$SELECT queue._check_manage(NULL::queue._queues, 10)$$),
	('queue._check_name', $$SELECT queue._check_name('x', 'y')$$),
	('queue._register', $$SELECT queue._register()$$);
SELECT label, pg_temp.as_role('queue_test_nobody', sql) AS nobody,
	   pg_temp.as_role('queue_test_owner', sql) AS owner
FROM acl_table ORDER BY ord;
GRANT USAGE ON SCHEMA queue_data TO queue_test_nobody;
SELECT label, pg_temp.as_role('queue_test_nobody', sql) AS nobody_with_usage
FROM acl_table WHERE label ~ 'messages|dedup|attempts' ORDER BY ord;
REVOKE USAGE ON SCHEMA queue_data FROM queue_test_nobody;
-- every internal function is closed to other roles, but those the views
-- call as the reading role (each checks that role may see the queue)
SELECT p.proname, p.prosecdef AS security_definer
FROM pg_proc p WHERE p.pronamespace = 'queue'::regnamespace AND p.proname LIKE '\_%'
  AND has_function_privilege('queue_test_nobody', p.oid, 'EXECUTE')
ORDER BY p.proname;
-- every SECURITY DEFINER function pins its search_path
SELECT count(*) AS definer_without_path
FROM pg_proc p
WHERE p.pronamespace = 'queue'::regnamespace AND p.prosecdef
  AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false);
-- the API functions are not SECURITY DEFINER: they run as the caller
SELECT count(*) AS api_definers FROM pg_proc p
WHERE p.pronamespace = 'queue'::regnamespace AND p.proname NOT LIKE '\_%' AND p.prosecdef;
-- nothing of the extension is granted to PUBLIC but the two views
SELECT regexp_replace(c.relname, '[0-9]+', 'N') AS relation, c.relkind,
	   bool_or(has_table_privilege('queue_test_nobody', c.oid, 'SELECT')) AS nobody_reads,
	   bool_or(has_table_privilege('queue_test_nobody', c.oid, 'INSERT, UPDATE, DELETE, TRUNCATE')) AS nobody_writes
FROM pg_class c WHERE c.relnamespace IN ('queue'::regnamespace, 'queue_data'::regnamespace)
  AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
GROUP BY 1, 2 ORDER BY 1, 2;
SELECT has_schema_privilege('queue_test_outsider', 'queue', 'USAGE') AS outsider_queue_usage,
	   has_schema_privilege('queue_test_outsider', 'queue_data', 'USAGE') AS outsider_data_usage;

----------------------------------------------------------------------
-- a hostile search_path: a schema of the attacker's, ahead of pg_catalog,
-- with functions and operators shadowing the built-ins our statements use;
-- each RAISEs, so a call would show.  In fresh sessions, so the plans the
-- API keeps are made under that path.
----------------------------------------------------------------------
CREATE SCHEMA queue_test_attacker AUTHORIZATION queue_test_nobody;
GRANT USAGE ON SCHEMA queue_test_attacker TO PUBLIC;
SET ROLE queue_test_nobody;
CREATE FUNCTION queue_test_attacker.trap() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'attacker function called' USING ERRCODE = 'QATK0';
END
$$;
DO $$
DECLARE
	f record;
BEGIN
	FOR f IN SELECT * FROM (VALUES
		('nextval', 'regclass', 'bigint'), ('currval', 'regclass', 'bigint'),
		('setval', 'regclass, bigint', 'bigint'),
		('now', '', 'timestamptz'), ('clock_timestamp', '', 'timestamptz'),
		('statement_timestamp', '', 'timestamptz'), ('transaction_timestamp', '', 'timestamptz'),
		('lower', 'text', 'text'), ('upper', 'text', 'text'),
		('length', 'text', 'integer'), ('octet_length', 'text', 'integer'),
		('char_length', 'text', 'integer'), ('hashtext', 'text', 'integer'),
		('textcat', 'text, text', 'text'), ('texteq', 'text, text', 'boolean'),
		('int8eq', 'bigint, bigint', 'boolean'), ('oideq', 'oid, oid', 'boolean'),
		('pg_advisory_xact_lock', 'bigint', 'void'),
		('array_position', 'anyarray, anyelement', 'integer'),
		('array_remove', 'anyarray, anyelement', 'anyarray'),
		('array_append', 'anyarray, anyelement', 'anyarray'),
		('array_cat', 'anyarray, anyarray', 'anyarray'),
		('cardinality', 'anyarray', 'integer'), ('array_length', 'anyarray, integer', 'integer'),
		('unnest', 'anyarray', 'anyelement'),
		('jsonb_typeof', 'jsonb', 'text'), ('current_setting', 'text, boolean', 'text'),
		('current_setting', 'text', 'text'), ('current_database', '', 'name'),
		('has_database_privilege', 'oid, text, text', 'boolean'),
		('pg_has_role', 'oid, oid, text', 'boolean'),
		('format', 'text', 'text'), ('format', 'text, text', 'text'),
		('format', 'text, bigint', 'text'),
		('quote_ident', 'text', 'text'), ('quote_literal', 'text', 'text'),
		('sha256', 'bytea', 'bytea'), ('convert_to', 'text, name', 'bytea'),
		('encode', 'bytea, text', 'text'), ('decode', 'text, text', 'bytea'),
		('gen_random_uuid', '', 'uuid'), ('coalesce', 'text, text', 'text'),
		('coalesce', 'interval, interval', 'interval'),
		('greatest', 'bigint, bigint', 'bigint'), ('least', 'integer, integer', 'integer'),
		('pg_notify', 'text, text', 'void'), ('to_jsonb', 'text', 'jsonb'),
		('jsonb_build_object', 'text, text', 'jsonb'), ('md5', 'text', 'text'),
		('age', 'timestamptz', 'interval'), ('random', '', 'double precision'),
		('btrim', 'text', 'text'), ('regexp_like', 'text, text', 'boolean'),
		('textlike', 'text, text', 'boolean'), ('set_config', 'text, text, boolean', 'text'))
		AS t(name, args, ret)
	LOOP
		EXECUTE format('CREATE FUNCTION queue_test_attacker.%I(%s) RETURNS %s%s LANGUAGE plpgsql AS %L',
					   f.name, f.args,
					   CASE WHEN f.name = 'unnest' THEN 'SETOF ' ELSE '' END, f.ret,
					   'BEGIN PERFORM queue_test_attacker.trap(); END');
	END LOOP;
	FOR f IN SELECT * FROM (VALUES
		('=', 'text', 'text'), ('=', 'bigint', 'bigint'), ('=', 'oid', 'oid'),
		('=', 'integer', 'integer'), ('=', 'boolean', 'boolean'), ('=', 'name', 'name'),
		('<>', 'text', 'text'), ('<>', 'bigint', 'bigint'), ('<>', 'boolean', 'boolean'),
		('<', 'interval', 'interval'), ('>', 'interval', 'interval'),
		('<', 'bigint', 'bigint'), ('>', 'bigint', 'bigint'), ('<', 'integer', 'integer'),
		('>', 'integer', 'integer'), ('<=', 'integer', 'integer'), ('>=', 'integer', 'integer'),
		('<=', 'timestamptz', 'timestamptz'), ('>', 'timestamptz', 'timestamptz'),
		('<', 'timestamptz', 'timestamptz'), ('>=', 'timestamptz', 'timestamptz'),
		('+', 'timestamptz', 'interval'), ('-', 'timestamptz', 'interval'),
		('-', 'timestamptz', 'timestamptz'), ('+', 'bigint', 'bigint'), ('+', 'integer', 'integer'),
		('||', 'text', 'text'), ('||', 'anyarray', 'anyelement'), ('@>', 'anyarray', 'anyarray'),
		('~~', 'text', 'text'), ('~', 'text', 'text'), ('->>', 'jsonb', 'text'))
		AS t(op, l, r)
	LOOP
		EXECUTE format('CREATE FUNCTION queue_test_attacker.%I(%s, %s) RETURNS %s LANGUAGE plpgsql AS %L',
					   'op_' || md5(f.op || f.l || f.r), f.l, f.r,
					   CASE WHEN f.op IN ('+', '-', '||') AND f.l = 'anyarray' THEN 'anyarray'
							WHEN f.op IN ('+', '-') AND f.r = 'interval' THEN 'timestamptz'
							WHEN f.op = '-' THEN 'interval'
							WHEN f.op = '+' THEN f.l
							WHEN f.op IN ('||', '->>') THEN 'text'
							ELSE 'boolean' END,
					   'BEGIN PERFORM queue_test_attacker.trap(); END');
		EXECUTE format('CREATE OPERATOR queue_test_attacker.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = queue_test_attacker.%I)',
					   f.op, f.l, f.r, 'op_' || md5(f.op || f.l || f.r));
	END LOOP;
END
$$;
RESET ROLE;
SELECT count(*) AS attacker_functions FROM pg_proc WHERE pronamespace = 'queue_test_attacker'::regnamespace;
SELECT count(*) AS attacker_operators FROM pg_operator WHERE oprnamespace = 'queue_test_attacker'::regnamespace;

-- the victim: a superuser in a fresh session.  err() runs its statement
-- under the caller's search_path, so it spells out pg_catalog itself.
\c
SET queue.default_storage = dedicated;
SET client_min_messages = warning;
CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN pg_catalog.concat(SQLSTATE, ': ', SQLERRM);
END
$$;
SET search_path = queue_test_attacker, pg_catalog;
-- the trap is armed: unqualified built-ins of this session hit it
SELECT pg_temp.err($$SELECT 'a'::text = 'a'::text$$) AS text_eq,
	   pg_temp.err($$SELECT 1::bigint = 1::bigint$$) AS int8_eq,
	   pg_temp.err($$SELECT now()$$) AS now,
	   pg_temp.err($$SELECT lower('A')$$) AS lower,
	   pg_temp.err($$SELECT 'a'::text || 'b'::text$$) AS concat;
-- every API function does its work all the same
SELECT pg_temp.err($$SELECT queue.create('acl_hostile')$$) AS create_std;
SELECT pg_temp.err($$SELECT queue.create('acl_hostile.fifo', fifo => true, content_based_deduplication => true)$$) AS create_fifo;
SELECT pg_temp.err($$SELECT queue.create('acl_hostile_dlq')$$) AS create_dlq;
SELECT pg_temp.err($$SELECT queue.alter('acl_hostile', visibility_timeout => '5 minutes', dead_letter_queue => 'acl_hostile_dlq', max_receive_count => 2, tags => '{"t": 1}')$$) AS alter;
SELECT pg_temp.err($$SELECT queue.create('acl_hostile')$$) AS create_other_attributes;
SELECT pg_temp.err($$SELECT queue.send('acl_hostile', 'h1')$$) AS send;
SELECT pg_temp.err($$SELECT queue.send('acl_hostile', '{"h": 2}'::jsonb, delay => '0', deduplication_id => 'dd-2', attributes => '{"a": 1}')$$) AS send_jsonb;
SELECT pg_temp.err($$SELECT queue.send('acl_hostile', 'h2 again', deduplication_id => 'dd-2')$$) AS send_duplicate;
SELECT pg_temp.err($$SELECT queue.send_batch('acl_hostile', ARRAY['h3', 'h4', 'h5'])$$) AS send_batch;
SELECT pg_temp.err($$SELECT queue.send_batch('acl_hostile.fifo', ARRAY['f1', 'f2'], message_group_ids => ARRAY['g', 'g'])$$) AS send_batch_fifo;
SELECT pg_temp.err($$SELECT queue.send('acl_hostile.fifo', 'f3', message_group_id => 'g')$$) AS send_fifo;
SELECT pg_temp.err($$SELECT queue.send('acl_hostile', 'x', delay => '-1 second')$$) AS send_bad_delay;
SELECT pg_temp.err($$SELECT queue.receive('acl_hostile', 2, receive_attempt_id => 'att')$$) AS receive;
SELECT pg_temp.err($$SELECT queue.receive('acl_hostile', 2, receive_attempt_id => 'att')$$) AS receive_retry;
SELECT pg_temp.err($$SELECT queue.receive('acl_hostile.fifo', 10)$$) AS receive_fifo;
SELECT pg_temp.err($$SELECT queue.peek('acl_hostile', 100)$$) AS peek;
SELECT pg_temp.err($$SELECT queue.grant('acl_hostile', 'queue_test_sender', '{send, receive}')$$) AS grant;
SELECT pg_temp.err($$SELECT queue.grant('acl_hostile', 'public', '{send}')$$) AS grant_public;
SELECT pg_temp.err($$SELECT queue.revoke('acl_hostile', 'public', '{send}')$$) AS revoke_public;
SELECT pg_temp.err($$SELECT * FROM queue.queues$$) AS view_queues;
SELECT pg_temp.err($$SELECT * FROM queue.stats$$) AS view_stats;
-- receive, change visibility and delete by receipt
CREATE TEMP TABLE got AS SELECT * FROM queue.receive('acl_hostile', 10, visibility_timeout => '1 hour');
SELECT pg_catalog.count(*) AS received FROM got;
SELECT pg_temp.err(pg_catalog.format('SELECT queue.change_visibility(%L, %L, %L)', 'acl_hostile', receipt, '2 hours'))
FROM got ORDER BY message_id LIMIT 1;
SELECT pg_temp.err(pg_catalog.format('SELECT queue.change_visibility_batch(%L, %L, %L)', 'acl_hostile',
	(SELECT pg_catalog.array_agg(receipt) FROM got), '3 hours')) AS change_visibility_batch;
SELECT pg_temp.err(pg_catalog.format('SELECT queue.delete(%L, %L)', 'acl_hostile', receipt))
FROM got ORDER BY message_id LIMIT 1;
SELECT pg_temp.err(pg_catalog.format('SELECT queue.delete_batch(%L, %L)', 'acl_hostile',
	(SELECT pg_catalog.array_agg(receipt) FROM got))) AS delete_batch;
-- a dead letter, moved by a receive, and redriven twice
SELECT pg_temp.err($$SELECT queue.create('acl_hostile_src', dead_letter_queue => 'acl_hostile_dlq', max_receive_count => 1)$$) AS create_src;
SELECT pg_temp.err($$SELECT queue.send_batch('acl_hostile_src', ARRAY['dead 1', 'dead 2'])$$) AS send;
SELECT pg_temp.err($$SELECT queue.receive('acl_hostile_src', 10, visibility_timeout => '0')$$) AS receive;
SELECT pg_temp.err($$SELECT queue.receive('acl_hostile_src', 10)$$) AS receive_dead_letters;
SELECT pg_temp.err($$SELECT queue.redrive('acl_hostile_dlq', max_messages => 1)$$) AS redrive;
SELECT pg_temp.err($$SELECT queue.redrive('acl_hostile_dlq', 'acl_hostile', 10)$$) AS redrive_to;
SELECT pg_temp.err($$SELECT queue.purge('acl_hostile_dlq')$$) AS purge;
RESET search_path;
-- the messages went where they should
SELECT queue_name, visible, in_flight, delayed FROM queue.stats
WHERE queue_name LIKE 'acl_hostile%' ORDER BY queue_name;
SELECT body, attributes, deduplication_id, receive_count FROM queue.peek('acl_hostile', 100)
ORDER BY body;
SELECT body, message_group_id FROM queue.peek('acl_hostile.fifo', 100);
SELECT body, receive_count FROM queue.peek('acl_hostile_src', 100);
SELECT queue_name, visibility_timeout, dead_letter_queue, max_receive_count, tags, owner::text = current_user AS owned
FROM queue.queues WHERE queue_name LIKE 'acl_hostile%' ORDER BY queue_name;
SELECT count(*) FILTER (WHERE a.privilege_type = 'INSERT') AS send,
	   count(*) FILTER (WHERE a.privilege_type = 'UPDATE') AS receive
FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
WHERE c.oid OPERATOR(pg_catalog.=) (SELECT pg_catalog.format('queue_data.q%s', queue_id)::pg_catalog.regclass
				FROM queue.queues WHERE queue_name OPERATOR(pg_catalog.=) 'acl_hostile')
  AND a.grantee OPERATOR(pg_catalog.<>) c.relowner;
-- and a non-superuser victim in a fresh session: the owner, then the
-- sender with its grant
\c
SET queue.default_storage = dedicated;
SET client_min_messages = warning;
CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN pg_catalog.concat(SQLSTATE, ': ', SQLERRM);
END
$$;
SET ROLE queue_test_owner;
SET search_path = queue_test_attacker, pg_catalog;
SELECT pg_temp.err($$SELECT queue.create('acl_hostile2')$$) AS create;
SELECT pg_temp.err($$SELECT queue.send('acl_hostile2', 'o1')$$) AS send;
SELECT pg_temp.err($$SELECT queue.grant('acl_hostile2', 'queue_test_sender', '{send}')$$) AS grant;
SELECT pg_temp.err($$SELECT queue.receive('acl_hostile2')$$) AS receive;
SELECT pg_temp.err($$SELECT queue.purge('acl_hostile2')$$) AS purge;
SELECT pg_temp.err($$SELECT queue.alter('acl_hostile2', delay => '1 second')$$) AS alter;
RESET ROLE;
SET ROLE queue_test_sender;
SELECT pg_temp.err($$SELECT queue.send('acl_hostile2', 's1')$$) AS send;
SELECT pg_temp.err($$SELECT queue.send_batch('acl_hostile2', ARRAY['s2', 's3'])$$) AS send_batch;
SELECT pg_temp.err($$SELECT queue.receive('acl_hostile2')$$) AS receive_refused;
RESET ROLE;
RESET search_path;
SELECT count(*) AS messages, owner::text AS owner
FROM queue.peek('acl_hostile2', 100), queue.queues WHERE queue_name = 'acl_hostile2' GROUP BY owner;
SELECT queue.drop('acl_hostile'), queue.drop('acl_hostile.fifo'), queue.drop('acl_hostile_src'),
	   queue.drop('acl_hostile_dlq'), queue.drop('acl_hostile2');

----------------------------------------------------------------------
-- traps in pg_temp: the caller's own temporary schema holds views named
-- like the catalogs, domains named like the types our statements name,
-- functions and operators named like built-ins; each raises QTMP0 when
-- used.  The caller searches pg_temp first, our statements never resolve
-- a trap (up to PostgreSQL 16 pg_temp is not in their path; from 17 it
-- comes after pg_catalog), and the caller's search path is back after
-- every call, failed ones too.  In a fresh session, so every plan the API
-- keeps is made with the traps in place.
----------------------------------------------------------------------
\c
SET queue.default_storage = dedicated;
SET client_min_messages = warning;
CREATE FUNCTION pg_temp.err(cmd pg_catalog.text) RETURNS pg_catalog.text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN pg_catalog.concat(SQLSTATE, ': ', SQLERRM);
END
$$;
CREATE FUNCTION pg_temp.temp_trap() RETURNS pg_catalog.bool LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'pg_temp object used' USING ERRCODE = 'QTMP0';
END
$$;
DO $$
DECLARE
	t pg_catalog.text;
	f record;
BEGIN
	FOREACH t IN ARRAY ARRAY['pg_class', 'pg_namespace', 'pg_type', 'pg_proc',
		'pg_index', 'pg_roles', 'pg_authid', 'pg_database', 'pg_extension',
		'pg_locks', 'pg_settings', 'pg_stat_activity']
	LOOP
		EXECUTE pg_catalog.format('CREATE VIEW pg_temp.%I AS SELECT * FROM pg_catalog.%I WHERE pg_temp.temp_trap()', t, t);
	END LOOP;
	FOREACH t IN ARRAY ARRAY['text', 'varchar', 'name', 'jsonb', 'json', 'bytea',
		'int2', 'int4', 'int8', 'numeric', 'float8', 'bool', 'oid', 'uuid',
		'timestamptz', 'regclass', 'regrole', 'regnamespace', 'regproc']
	LOOP
		EXECUTE pg_catalog.format('CREATE DOMAIN pg_temp.%I AS pg_catalog.%I CHECK (pg_temp.temp_trap())', t, t);
	END LOOP;
	-- PostgreSQL never looks up an unqualified function or operator in
	-- pg_temp; these would show if that changed
	FOR f IN SELECT * FROM (VALUES
		('now', '', 'timestamptz'), ('clock_timestamp', '', 'timestamptz'),
		('nextval', 'regclass', 'int8'), ('lower', 'text', 'text'),
		('length', 'text', 'int4'), ('octet_length', 'text', 'int4'),
		('hashtext', 'text', 'int4'), ('to_jsonb', 'text', 'jsonb'),
		('jsonb_build_object', 'text, text', 'jsonb'), ('format', 'text', 'text'),
		('pg_advisory_xact_lock', 'int8', 'void'), ('current_setting', 'text', 'text'),
		('sha256', 'bytea', 'bytea'), ('gen_random_uuid', '', 'uuid'),
		('cardinality', 'anyarray', 'int4'), ('array_position', 'anyarray, anyelement', 'int4'))
		AS v(name, args, ret)
	LOOP
		EXECUTE pg_catalog.format('CREATE FUNCTION pg_temp.%I(%s) RETURNS pg_catalog.%I LANGUAGE plpgsql AS %L',
					   f.name, (SELECT pg_catalog.string_agg('pg_catalog.' || pg_catalog.btrim(a), ', ')
								FROM pg_catalog.unnest(pg_catalog.string_to_array(f.args, ',')) a),
					   f.ret, 'BEGIN PERFORM pg_temp.temp_trap(); END');
	END LOOP;
	FOR f IN SELECT * FROM (VALUES
		('=', 'text', 'text', 'bool'), ('=', 'int8', 'int8', 'bool'), ('<>', 'int8', 'int8', 'bool'),
		('<', 'int8', 'int8', 'bool'), ('<=', 'timestamptz', 'timestamptz', 'bool'),
		('>', 'timestamptz', 'timestamptz', 'bool'), ('+', 'timestamptz', 'interval', 'timestamptz'),
		('||', 'text', 'text', 'text'), ('->>', 'jsonb', 'text', 'text'))
		AS v(op, l, r, ret)
	LOOP
		EXECUTE pg_catalog.format('CREATE FUNCTION pg_temp.%I(pg_catalog.%I, pg_catalog.%I) RETURNS pg_catalog.%I LANGUAGE plpgsql AS %L',
					   'op_' || pg_catalog.md5(f.op || f.l || f.r), f.l, f.r, f.ret,
					   'BEGIN PERFORM pg_temp.temp_trap(); END');
		EXECUTE pg_catalog.format('CREATE OPERATOR pg_temp.%s (LEFTARG = pg_catalog.%I, RIGHTARG = pg_catalog.%I, FUNCTION = pg_temp.%I)',
					   f.op, f.l, f.r, 'op_' || pg_catalog.md5(f.op || f.l || f.r));
	END LOOP;
END
$$;
SELECT pg_catalog.count(*) AS temp_views FROM pg_catalog.pg_class
WHERE relnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema() AND relkind OPERATOR(pg_catalog.=) 'v';
SELECT pg_catalog.count(*) AS temp_domains FROM pg_catalog.pg_type
WHERE typnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema() AND typtype OPERATOR(pg_catalog.=) 'd';
SELECT pg_catalog.count(*) AS temp_operators FROM pg_catalog.pg_operator
WHERE oprnamespace OPERATOR(pg_catalog.=) pg_catalog.pg_my_temp_schema();
SET search_path = pg_temp, pg_catalog;
-- the traps are armed: the caller's own statements hit them
SELECT pg_temp.err($$SELECT 'a'::text$$) AS text_cast,
	   pg_temp.err($$SELECT '{}'::jsonb$$) AS jsonb_cast,
	   pg_temp.err($$SELECT 1::int8$$) AS int8_cast,
	   pg_temp.err($$SELECT count(*) FROM pg_class$$) AS pg_class,
	   pg_temp.err($$SELECT pg_temp.now()$$) AS qualified_now;
-- every API function does its work all the same
SELECT pg_temp.err($$SELECT queue.create('acl_temp')$$) AS create_std;
SELECT pg_temp.err($$SELECT queue.create('acl_temp.fifo', fifo => true, content_based_deduplication => true)$$) AS create_fifo;
SELECT pg_temp.err($$SELECT queue.create('acl_temp_dlq')$$) AS create_dlq;
SELECT pg_temp.err($$SELECT queue.alter('acl_temp', visibility_timeout => '5 minutes', dead_letter_queue => 'acl_temp_dlq', max_receive_count => 2, tags => '{"t": 1}')$$) AS alter;
SELECT pg_temp.err($$SELECT queue.send('acl_temp', 't1')$$) AS send;
SELECT pg_temp.err($$SELECT queue.send('acl_temp', '{"h": 2}', delay => '0', deduplication_id => 'dd-2', attributes => '{"a": 1}')$$) AS send_dedup;
SELECT pg_temp.err($$SELECT queue.send('acl_temp', 't2 again', deduplication_id => 'dd-2')$$) AS send_duplicate;
SELECT pg_temp.err($$SELECT queue.send_batch('acl_temp', ARRAY['t3', 't4', 't5'])$$) AS send_batch;
SELECT pg_temp.err($$SELECT queue.send_batch('acl_temp.fifo', ARRAY['f1', 'f2'], message_group_ids => ARRAY['g', 'g'])$$) AS send_batch_fifo;
SELECT pg_temp.err($$SELECT queue.send('acl_temp.fifo', 'f3', message_group_id => 'g')$$) AS send_fifo;
SELECT pg_temp.err($$SELECT queue.receive('acl_temp', 2, receive_attempt_id => 'att')$$) AS receive;
SELECT pg_temp.err($$SELECT queue.receive('acl_temp', 2, receive_attempt_id => 'att')$$) AS receive_retry;
SELECT pg_temp.err($$SELECT queue.receive('acl_temp.fifo', 10)$$) AS receive_fifo;
SELECT pg_temp.err($$SELECT queue.peek('acl_temp', 100)$$) AS peek;
SELECT pg_temp.err($$SELECT queue.grant('acl_temp', 'queue_test_sender', '{send, receive}')$$) AS grant;
SELECT pg_temp.err($$SELECT queue.revoke('acl_temp', 'queue_test_sender', '{receive}')$$) AS revoke;
SELECT pg_temp.err($$SELECT * FROM queue.queues$$) AS view_queues;
SELECT pg_temp.err($$SELECT * FROM queue.stats$$) AS view_stats;
CREATE TEMP TABLE got AS SELECT * FROM queue.receive('acl_temp', 10, visibility_timeout => '1 hour');
SELECT pg_catalog.count(*) AS received FROM got;
SELECT pg_temp.err(pg_catalog.format('SELECT queue.change_visibility(%L, %L, %L)', 'acl_temp', receipt, '2 hours'))
	AS change_visibility FROM got ORDER BY message_id LIMIT 1;
SELECT pg_temp.err(pg_catalog.format('SELECT queue.change_visibility_batch(%L, %L, %L)', 'acl_temp',
	(SELECT pg_catalog.array_agg(receipt) FROM got), '3 hours')) AS change_visibility_batch;
SELECT pg_temp.err(pg_catalog.format('SELECT queue.delete(%L, %L)', 'acl_temp', receipt))
	AS delete FROM got ORDER BY message_id LIMIT 1;
SELECT pg_temp.err(pg_catalog.format('SELECT queue.delete_batch(%L, %L)', 'acl_temp',
	(SELECT pg_catalog.array_agg(receipt) FROM got))) AS delete_batch;
SELECT pg_temp.err($$SELECT queue.create('acl_temp_src', dead_letter_queue => 'acl_temp_dlq', max_receive_count => 1)$$) AS create_src;
SELECT pg_temp.err($$SELECT queue.send_batch('acl_temp_src', ARRAY['dead 1', 'dead 2'])$$) AS send;
SELECT pg_temp.err($$SELECT queue.receive('acl_temp_src', 10, visibility_timeout => '0')$$) AS receive;
SELECT pg_temp.err($$SELECT queue.receive('acl_temp_src', 10)$$) AS receive_dead_letters;
SELECT pg_temp.err($$SELECT queue.redrive('acl_temp_dlq', max_messages => 1)$$) AS redrive;
SELECT pg_temp.err($$SELECT queue.redrive('acl_temp_dlq', 'acl_temp', 10)$$) AS redrive_to;
SELECT pg_temp.err($$SELECT queue.purge('acl_temp_dlq')$$) AS purge;
-- and as a role that is not a superuser, with the same traps
SET ROLE queue_test_owner;
SELECT pg_temp.err($$SELECT queue.create('acl_temp2')$$) AS create;
SELECT pg_temp.err($$SELECT queue.send('acl_temp2', 'o1', attributes => '{"a": 1}')$$) AS send;
SELECT pg_temp.err($$SELECT queue.grant('acl_temp2', 'queue_test_sender', '{send}')$$) AS grant;
SELECT pg_temp.err($$SELECT queue.receive('acl_temp2')$$) AS receive;
SELECT pg_temp.err($$SELECT queue.alter('acl_temp2', delay => '1 second')$$) AS alter;
SELECT pg_temp.err($$SELECT queue.purge('acl_temp2')$$) AS purge;
RESET ROLE;
-- the caller's search path is back after calls that worked and calls that
-- failed (here a bad argument, then a missing queue), and its traps with it
SELECT pg_catalog.current_setting('search_path') AS search_path;
SELECT pg_temp.err($$SELECT queue.send('acl_temp', 'x', delay => '-1 second')$$) AS send_bad_delay;
SELECT pg_temp.err($$SELECT queue.receive('acl_no_such_queue')$$) AS receive_missing;
SELECT pg_catalog.current_setting('search_path') AS search_path;
BEGIN;
SELECT pg_temp.err($$SELECT queue.send('acl_temp', 'in a transaction')$$) AS send;
SELECT pg_catalog.current_setting('search_path') AS search_path;
SELECT pg_temp.err($$SELECT 'a'::text$$) AS text_cast, pg_temp.err($$SELECT count(*) FROM pg_class$$) AS pg_class;
ROLLBACK;
RESET search_path;
-- the messages went where they should
SELECT queue_name, visible, in_flight, delayed FROM queue.stats
WHERE queue_name LIKE 'acl_temp%' ORDER BY queue_name;
SELECT body, attributes, deduplication_id, receive_count FROM queue.peek('acl_temp', 100)
ORDER BY body;
SELECT body, message_group_id FROM queue.peek('acl_temp.fifo', 100);
SELECT body, receive_count FROM queue.peek('acl_temp_src', 100);
SELECT queue_name, visibility_timeout, dead_letter_queue, max_receive_count, tags,
	   owner::pg_catalog.text = current_user AS owned_by_superuser
FROM queue.queues WHERE queue_name LIKE 'acl_temp%' ORDER BY queue_name;
SELECT queue.drop('acl_temp'), queue.drop('acl_temp.fifo'), queue.drop('acl_temp_src'),
	   queue.drop('acl_temp_dlq'), queue.drop('acl_temp2');
-- the traps go with the session
\c
SET queue.default_storage = dedicated;

----------------------------------------------------------------------
-- clean up: queues, roles, the attacker's schema
----------------------------------------------------------------------
SET client_min_messages = warning;
SELECT queue.alter('acl_q', dead_letter_queue => '');
SELECT queue.drop('acl_q'), queue.drop('acl_dlq'), queue.drop('acl_other');
SELECT count(*) FROM queue.queues;
DROP SCHEMA queue_test_attacker CASCADE;
DROP EXTENSION dblink;
DROP OWNED BY queue_test_owner, queue_test_sender, queue_test_receiver, queue_test_manager,
	queue_test_nobody, queue_test_owner_member, queue_test_sender_member, queue_test_outsider;
DROP ROLE queue_test_owner_member, queue_test_sender_member, queue_test_owner, queue_test_sender,
	queue_test_receiver, queue_test_manager, queue_test_nobody, queue_test_outsider;
SELECT count(*) FROM pg_roles WHERE rolname LIKE 'queue\_test\_%';
