-- role_drop: a role that owns a consumer or a subscription cannot be
-- dropped, as for queues (DESIGN.md "Consumers", "Access").  Each such
-- owner holds SELECT on queue._consumer_owners (_subscription_owners),
-- which PostgreSQL records in pg_shdepend (so DROP ROLE fails in every database: TAP
-- 013_dump_restore checks another one); here, in the extension's database,
-- DROP ROLE names the consumers and subscriptions.  DROP OWNED drops them,
-- REASSIGN OWNED moves them, and the grant goes with a role's last one
-- (drop_consumer, a dropped queue).  Roles are
-- queue_test_rd_* and dropped here.  Output is names, booleans, counts and
-- SQLSTATEs with their messages.
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

-- Who holds SELECT on queue._consumer_owners and _subscription_owners,
-- and pg_shdepend's entries for it.
CREATE FUNCTION pg_temp.refs() RETURNS TABLE (tbl name, grantee text, shdepend bigint) LANGUAGE sql AS $$
	SELECT c.relname, x.grantee::regrole::text,
		   (SELECT count(*) FROM pg_shdepend d
			WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.objsubid = 0
			  AND d.refobjid = x.grantee AND d.deptype = 'a')
	FROM pg_class c, aclexplode(c.relacl) x
	WHERE c.oid IN ('queue._consumer_owners'::regclass, 'queue._subscription_owners'::regclass)
	  AND x.grantee <> c.relowner
	ORDER BY 1, 2
$$;

CREATE ROLE queue_test_rd_cons;		-- owns a consumer
CREATE ROLE queue_test_rd_sub;		-- owns a subscription
CREATE ROLE queue_test_rd_both;		-- owns one of each
CREATE ROLE queue_test_rd_heir;		-- REASSIGN OWNED's target
CREATE ROLE queue_test_rd_none;		-- owns nothing
GRANT USAGE ON SCHEMA queue TO queue_test_rd_cons, queue_test_rd_sub, queue_test_rd_both,
	queue_test_rd_heir, queue_test_rd_none;

SELECT queue.create('rd_q') > 0 AS created;
SELECT queue.create('rd_q2') > 0 AS created;
SELECT queue.create_topic('rd_t') > 0 AS created;
SELECT queue.create_topic('rd_t2') > 0 AS created;
CREATE FUNCTION public.rd_handler(msgs queue.message[]) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT queue.grant('rd_q', r, '{receive, send}'), queue.grant('rd_q2', r, '{receive, send}'),
	   queue.grant_topic('rd_t', r, '{manage}'), queue.grant_topic('rd_t2', r, '{manage}')
FROM unnest(ARRAY['queue_test_rd_cons', 'queue_test_rd_sub', 'queue_test_rd_both']) r;

SELECT * FROM pg_temp.refs();

-- a consumer (paused: the worker never runs it), a subscription, both
SET ROLE queue_test_rd_cons;
SELECT queue.create_consumer('rd_c1', 'rd_q', 'public.rd_handler(queue.message[])') > 0 AS created;
SELECT queue.pause_consumer('rd_c1');
RESET ROLE;
SET ROLE queue_test_rd_sub;
SELECT queue.subscribe('rd_t', 'rd_q') > 0 AS subscribed;
RESET ROLE;
SET ROLE queue_test_rd_both;
SELECT queue.create_consumer('rd_c2', 'rd_q2', 'public.rd_handler(queue.message[])') > 0 AS created;
SELECT queue.pause_consumer('rd_c2');
SELECT queue.subscribe('rd_t2', 'rd_q2') > 0 AS subscribed;
RESET ROLE;

-- each owner holds its privilege, recorded in pg_shdepend
SELECT * FROM pg_temp.refs();

-- every grant of theirs revoked: only the consumers and subscriptions remain
SELECT queue.revoke('rd_q', r, '{receive, send}'), queue.revoke('rd_q2', r, '{receive, send}'),
	   queue.revoke_topic('rd_t', r, '{manage}'), queue.revoke_topic('rd_t2', r, '{manage}')
FROM unnest(ARRAY['queue_test_rd_cons', 'queue_test_rd_sub', 'queue_test_rd_both']) r;
REVOKE USAGE ON SCHEMA queue FROM queue_test_rd_cons, queue_test_rd_sub, queue_test_rd_both,
	queue_test_rd_heir, queue_test_rd_none;

----------------------------------------------------------------------
-- DROP ROLE is refused (2BP01), naming what the role owns
SELECT pg_temp.err('DROP ROLE queue_test_rd_cons') AS drop_cons;
SELECT pg_temp.err('DROP ROLE queue_test_rd_sub') AS drop_sub;
SELECT pg_temp.err('DROP ROLE queue_test_rd_both') AS drop_both;
SELECT pg_temp.err('DROP ROLE queue_test_rd_none, queue_test_rd_cons') AS drop_two;
SELECT pg_temp.err('DROP ROLE IF EXISTS queue_test_rd_missing, queue_test_rd_sub') AS drop_if_exists;
SELECT count(*) AS consumers_left FROM queue.consumers WHERE consumer_name IN ('rd_c1', 'rd_c2');
-- a role that owns none drops at once
SELECT pg_temp.err('DROP ROLE queue_test_rd_none') AS drop_none;

----------------------------------------------------------------------
-- REASSIGN OWNED moves the consumer; the old owner drops, the new one cannot
REASSIGN OWNED BY queue_test_rd_cons TO queue_test_rd_heir;
SELECT consumer_name, role, state FROM queue.consumers WHERE consumer_name = 'rd_c1';
SELECT * FROM pg_temp.refs();
SELECT pg_temp.err('DROP ROLE queue_test_rd_cons') AS drop_cons_after_reassign;
SELECT pg_temp.err('DROP ROLE queue_test_rd_heir') AS drop_heir;

-- DROP OWNED drops the consumer; then the role drops
DROP OWNED BY queue_test_rd_heir;
SELECT count(*) AS rd_c1_left FROM queue._consumers WHERE consumer_name = 'rd_c1';
SELECT pg_temp.err('DROP ROLE queue_test_rd_heir') AS drop_heir_after_drop_owned;

-- DROP OWNED drops the subscription (the topic and queue stay); the role drops
DROP OWNED BY queue_test_rd_sub;
SELECT count(*) AS rd_t_subscriptions FROM queue.subscriptions WHERE topic_name = 'rd_t';
SELECT count(*) AS rd_t_and_rd_q FROM queue.topics t, queue.queues q
WHERE t.topic_name = 'rd_t' AND q.queue_name = 'rd_q';
SELECT pg_temp.err('DROP ROLE queue_test_rd_sub') AS drop_sub_after_drop_owned;
SELECT * FROM pg_temp.refs();

----------------------------------------------------------------------
-- the privilege goes with the last consumer (drop_consumer) and the last
-- subscription (a dropped queue takes it)
SELECT queue.drop_consumer('rd_c2');
SELECT * FROM pg_temp.refs();
SELECT pg_temp.err('DROP ROLE queue_test_rd_both') AS drop_both_with_subscription;
SELECT queue.drop('rd_q2');
SELECT count(*) AS subscriptions_left FROM queue._subscriptions WHERE owner::text LIKE 'queue_test_rd%';
SELECT * FROM pg_temp.refs();
SELECT pg_temp.err('DROP ROLE queue_test_rd_both') AS drop_both_after;

-- REASSIGN OWNED moves a subscription too
CREATE ROLE queue_test_rd_sub2;
CREATE ROLE queue_test_rd_heir2;
SELECT queue.grant('rd_q', 'queue_test_rd_sub2', '{send}'),
	   queue.grant_topic('rd_t', 'queue_test_rd_sub2', '{manage}');
GRANT USAGE ON SCHEMA queue TO queue_test_rd_sub2;
SET ROLE queue_test_rd_sub2;
SELECT queue.subscribe('rd_t', 'rd_q') > 0 AS subscribed;
RESET ROLE;
REVOKE USAGE ON SCHEMA queue FROM queue_test_rd_sub2;
REASSIGN OWNED BY queue_test_rd_sub2 TO queue_test_rd_heir2;
SELECT owner FROM queue._subscriptions s JOIN queue._topics t USING (topic_id) WHERE t.topic_name = 'rd_t';
SELECT * FROM pg_temp.refs();
SELECT pg_temp.err('DROP ROLE queue_test_rd_heir2') AS drop_heir2;
DROP OWNED BY queue_test_rd_sub2, queue_test_rd_heir2;
DROP ROLE queue_test_rd_sub2, queue_test_rd_heir2;
SELECT * FROM pg_temp.refs();

----------------------------------------------------------------------
-- under REPEATABLE READ the last consumer's drop leaves the privilege (its
-- check could miss a concurrent create): DROP ROLE is then refused by
-- PostgreSQL itself, naming the table, until DROP OWNED
CREATE ROLE queue_test_rd_rr;
SELECT queue.grant('rd_q', 'queue_test_rd_rr', '{receive}');
GRANT USAGE ON SCHEMA queue TO queue_test_rd_rr;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SET LOCAL ROLE queue_test_rd_rr;
SELECT queue.create_consumer('rd_rr', 'rd_q', 'public.rd_handler(queue.message[])') > 0 AS created;
SELECT queue.drop_consumer('rd_rr');
COMMIT;
SELECT queue.revoke('rd_q', 'queue_test_rd_rr', '{receive}');
REVOKE USAGE ON SCHEMA queue FROM queue_test_rd_rr;
SELECT * FROM pg_temp.refs();
SELECT pg_temp.err('DROP ROLE queue_test_rd_rr') AS drop_rr;
DROP OWNED BY queue_test_rd_rr;
SELECT pg_temp.err('DROP ROLE queue_test_rd_rr') AS drop_rr_after_drop_owned;

----------------------------------------------------------------------
-- DROP OWNED BY itself, run by a role without superuser nor USAGE on
-- schema queue: the event trigger drops its consumer (and revokes its
-- privilege, which PostgreSQL, revoking as that role, could not), and the
-- role drops
CREATE ROLE queue_test_rd_self;
SELECT queue.grant('rd_q', 'queue_test_rd_self', '{receive}');
GRANT USAGE ON SCHEMA queue TO queue_test_rd_self;
SET ROLE queue_test_rd_self;
SELECT queue.create_consumer('rd_self', 'rd_q', 'public.rd_handler(queue.message[])') > 0 AS created;
SELECT queue.pause_consumer('rd_self');
RESET ROLE;
SELECT queue.revoke('rd_q', 'queue_test_rd_self', '{receive}');
REVOKE USAGE ON SCHEMA queue FROM queue_test_rd_self;
SET ROLE queue_test_rd_self;
DROP OWNED BY queue_test_rd_self;
RESET ROLE;
SELECT count(*) AS rd_self_left FROM queue._consumers WHERE consumer_name = 'rd_self';
SELECT * FROM pg_temp.refs();
SELECT pg_temp.err('DROP ROLE queue_test_rd_self') AS drop_self;

SELECT queue.drop('rd_q'), queue.drop_topic('rd_t'), queue.drop_topic('rd_t2');
DROP FUNCTION public.rd_handler(queue.message[]);
SELECT count(*) AS roles_left FROM pg_roles WHERE rolname LIKE 'queue_test_rd%';
