-- topics: publish one message to every subscribed queue whose filters
-- match, in the publisher's transaction (DESIGN.md "Topics").  Every rule
-- of the filters with its edge cases, FIFO topics (group required,
-- deduplication at the topic), privileges and every error.  Roles are
-- queue_test_topics_* and dropped at the end.  Output is counts, bodies,
-- booleans and SQLSTATEs, never ids or times.
CREATE EXTENSION IF NOT EXISTS queue;
SET client_min_messages = warning;

CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, 'id \d+', 'id N');
END
$$;
-- the bodies a queue holds, in delivery order (then it is emptied)
CREATE FUNCTION pg_temp.bodies(q text) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(body, ',' ORDER BY message_id), '') FROM queue.peek(q, 100)
$$;
CREATE FUNCTION pg_temp.drain(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	b text := pg_temp.bodies(q);
BEGIN
	PERFORM queue.purge(q);
	RETURN b;
END
$$;

----------------------------------------------------------------------
-- create_topic: idempotent, names as queue names, attributes checked
SELECT queue.create_topic('tp') > 0 AS created;
SELECT queue.create_topic('tp') = (SELECT topic_id FROM queue.topics WHERE topic_name = 'tp') AS same_id;
SELECT pg_temp.err($$SELECT queue.create_topic('tp', fifo => true)$$) AS other_attributes;
SELECT pg_temp.err($$SELECT queue.create_topic('tp', tags => '{"a": 1}')$$) AS other_tags;
SELECT pg_temp.err($$SELECT queue.create_topic('bad name')$$) AS bad_name;
SELECT pg_temp.err($$SELECT queue.create_topic(repeat('t', 81))$$) AS long_name;
SELECT pg_temp.err($$SELECT queue.create_topic(NULL)$$) AS null_name;
SELECT pg_temp.err($$SELECT queue.create_topic('tq', fifo => NULL)$$) AS null_fifo;
SELECT pg_temp.err($$SELECT queue.create_topic('tq', tags => '[1]')$$) AS tags_not_object;
SELECT fifo, tags, owner, published FROM queue.topics WHERE topic_name = 'tp';

-- a topic and a queue may share a name: topics have their own namespace
SELECT queue.create('tp') > 0 AS queue_named_like_topic;
SELECT queue.create('tp_a') > 0, queue.create('tp_b') > 0, queue.create('tp_c') > 0;

----------------------------------------------------------------------
-- subscribe: idempotent; other filters for the same pair 42710
SELECT queue.subscribe('tp', 'tp_a') > 0 AS subscribed;
SELECT queue.subscribe('tp', 'tp_a') = (SELECT subscription_id FROM queue.subscriptions
										 WHERE topic_name = 'tp' AND queue_name = 'tp_a') AS same_id;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_a', filter_tags => '{x}')$$) AS other_filters;
SELECT pg_temp.err($$SELECT queue.subscribe('nope', 'tp_a')$$) AS unknown_topic;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'nope')$$) AS unknown_queue;
SELECT pg_temp.err($$SELECT queue.subscribe(NULL, 'tp_a')$$) AS null_topic;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', filter_tags => '{a,b,c,d,e,f}')$$) AS six_tags;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', filter_tags => '{abcdefghijklmnopq}')$$) AS tag_17_chars;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', filter_tags => '{a,NULL}')$$) AS null_tag;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', filter_tags => '{""}')$$) AS empty_tag;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', binding_keys => '{a..b}')$$) AS empty_word;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', binding_keys => ARRAY[repeat('k', 65)])$$) AS long_key;
-- invalid policies name their bad part
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', filter_policy => '[1]')$$) AS policy_not_object;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', filter_policy => '{}')$$) AS policy_empty;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', filter_policy => '{"color": "red"}')$$) AS not_a_list;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', filter_policy => '{"color": []}')$$) AS empty_list;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', filter_policy => '{"color": [{"prefix": 1}]}')$$) AS prefix_number;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', filter_policy => '{"n": [{"numeric": [">", "a"]}]}')$$) AS numeric_string;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', filter_policy => '{"n": [{"numeric": ["<", 1, ">", 0]}]}')$$) AS numeric_order;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', filter_policy => '{"n": [{"numeric": [">", 5, "<", 1]}]}')$$) AS numeric_empty_range;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', filter_policy => '{"n": [2000000000]}')$$) AS number_too_big;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', filter_policy => '{"a": {"b": [{"exists": "yes"}]}}')$$) AS nested_exists;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', filter_policy => '{"a": [{"wildcard": "x*"}]}')$$) AS unknown_operator;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', filter_policy => '{"a": [{"prefix": "x", "suffix": "y"}]}')$$) AS two_operators;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', filter_policy => '{"$or": [{"a": ["x"]}]}')$$) AS or_of_one;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', filter_policy => '{"a":[1],"b":[1],"c":[1],"d":[1],"e":[1],"f":[1]}')$$) AS six_names;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_b', filter_policy =>
	'{"a":[1,2,3,4,5,6,7,8,9,10],"b":[1,2,3,4,5,6,7,8,9,10],"c":[1,2]}')$$) AS combinations_200;
SELECT count(*) AS subscriptions_made_by_errors FROM queue.subscriptions WHERE queue_name = 'tp_b';

----------------------------------------------------------------------
-- publish: fan-out in the publisher's transaction
SELECT queue.subscribe('tp', 'tp_b') > 0 AS b_subscribed;
CREATE TEMP TABLE pub AS
	SELECT * FROM queue.publish('tp', 'one', attributes => '{"k": "v"}', message_group_id => 'g1');
SELECT message_id > 0 AS has_id, delivered, duplicate FROM pub;
SELECT pg_temp.bodies('tp_a') AS a, pg_temp.bodies('tp_b') AS b, pg_temp.bodies('tp') AS queue_tp_untouched;
-- a copy carries body, attributes and group; its deduplication_id names
-- the topic and the topic's message id
SELECT m.body, m.attributes, m.message_group_id, m.deduplication_id = 'tp:' || p.message_id AS origin
FROM queue.receive('tp_a') m, pub p;
SELECT split_part(deduplication_id, ':', 1) AS topic FROM queue.peek('tp_b');
SELECT pg_temp.drain('tp_a') IS NOT NULL, pg_temp.drain('tp_b') IS NOT NULL;
-- the copies are ordinary messages: jsonb bodies come back as text; delay applies
SELECT delivered FROM queue.publish('tp', '{"x": 1}'::jsonb);
SELECT body FROM queue.receive('tp_a');
SELECT delivered FROM queue.publish('tp', 'later', delay => '1 hour');
SELECT count(*) AS delayed_not_received FROM queue.receive('tp_b', 10) WHERE body = 'later';
SELECT pg_temp.drain('tp_a') IS NOT NULL, pg_temp.drain('tp_b') IS NOT NULL;
-- rollback delivers nothing, a savepoint rolled back delivers nothing of its own
BEGIN;
SELECT delivered FROM queue.publish('tp', 'rolled back');
ROLLBACK;
BEGIN;
SELECT delivered FROM queue.publish('tp', 'kept');
SAVEPOINT s;
SELECT delivered FROM queue.publish('tp', 'rolled back to savepoint');
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT pg_temp.drain('tp_a') AS a, pg_temp.drain('tp_b') AS b;
-- bad input to publish
SELECT pg_temp.err($$SELECT queue.publish('nope', 'x')$$) AS unknown_topic;
SELECT pg_temp.err($$SELECT queue.publish('tp', NULL::text)$$) AS null_body;
SELECT pg_temp.err($$SELECT queue.publish('tp', '')$$) AS empty_body;
SELECT pg_temp.err($$SELECT queue.publish('tp', 'x', tags => '{a,b,c,d,e,f}')$$) AS six_tags;
SELECT pg_temp.err($$SELECT queue.publish('tp', 'x', tags => '{abcdefghijklmnopq}')$$) AS long_tag;
SELECT pg_temp.err($$SELECT queue.publish('tp', 'x', routing_key => '')$$) AS empty_routing_key;
SELECT pg_temp.err($$SELECT queue.publish('tp', 'x', attributes => '[1]')$$) AS attributes_not_object;
SELECT pg_temp.err($$SELECT queue.publish('tp', 'x', delay => '-1 s')$$) AS negative_delay;
SELECT pg_temp.bodies('tp_a') AS nothing_sent_by_errors;

----------------------------------------------------------------------
-- filter_tags (CMQ): unset takes everything; set takes a message sharing a
-- tag, never an untagged one
SELECT queue.unsubscribe('tp', 'tp_b');
SELECT queue.subscribe('tp', 'tp_b', filter_tags => '{red, blue}') > 0;
SELECT delivered FROM queue.publish('tp', 'untagged');
SELECT delivered FROM queue.publish('tp', 'empty tags', tags => '{}');
SELECT delivered FROM queue.publish('tp', 'red', tags => '{red}');
SELECT delivered FROM queue.publish('tp', 'green and blue', tags => '{green, blue}');
SELECT delivered FROM queue.publish('tp', 'green', tags => '{green}');
SELECT pg_temp.drain('tp_a') AS a_takes_all, pg_temp.drain('tp_b') AS b_takes_red_or_blue;

-- binding_keys: '*' exactly one word, '#' zero or more; no routing key, no match
SELECT queue.unsubscribe('tp', 'tp_b');
SELECT queue.subscribe('tp', 'tp_b', binding_keys => '{order.*.eu}') > 0;
SELECT queue.subscribe('tp', 'tp_c', binding_keys => '{order.#, #.urgent}') > 0;
SELECT delivered FROM queue.publish('tp', 'no key');
SELECT delivered FROM queue.publish('tp', 'order.new.eu', routing_key => 'order.new.eu');
SELECT delivered FROM queue.publish('tp', 'order.eu', routing_key => 'order.eu');
SELECT delivered FROM queue.publish('tp', 'order.a.b.eu', routing_key => 'order.a.b.eu');
SELECT delivered FROM queue.publish('tp', 'order', routing_key => 'order');
SELECT delivered FROM queue.publish('tp', 'urgent', routing_key => 'urgent');
SELECT delivered FROM queue.publish('tp', 'x.urgent', routing_key => 'x.urgent');
SELECT delivered FROM queue.publish('tp', 'orders', routing_key => 'orders');
SELECT pg_temp.drain('tp_b') AS star_one_word, pg_temp.drain('tp_c') AS hash_zero_or_more;
SELECT pg_temp.drain('tp_a') IS NOT NULL;

-- filter_policy (SNS): names AND, list entries OR
SELECT queue.unsubscribe('tp', 'tp_b'), queue.unsubscribe('tp', 'tp_c');
SELECT queue.subscribe('tp', 'tp_b', filter_policy =>
	'{"color": ["red", {"prefix": "bl"}], "size": [{"numeric": [">=", 10, "<", 20]}]}') > 0;
SELECT delivered FROM queue.publish('tp', 'red 15', attributes => '{"color": "red", "size": 15}');
SELECT delivered FROM queue.publish('tp', 'blue 10', attributes => '{"color": "blue", "size": 10}');
SELECT delivered FROM queue.publish('tp', 'red 20', attributes => '{"color": "red", "size": 20}');
SELECT delivered FROM queue.publish('tp', 'red "15" (a string)', attributes => '{"color": "red", "size": "15"}');
SELECT delivered FROM queue.publish('tp', 'green 15', attributes => '{"color": "green", "size": 15}');
SELECT delivered FROM queue.publish('tp', 'red, no size', attributes => '{"color": "red"}');
SELECT delivered FROM queue.publish('tp', 'no attributes');
SELECT delivered FROM queue.publish('tp', 'array with red', attributes => '{"color": ["green", "red"], "size": 12}');
SELECT delivered FROM queue.publish('tp', 'array without', attributes => '{"color": ["green", "pink"], "size": 12}');
SELECT pg_temp.drain('tp_b') AS and_or_numeric_arrays;
SELECT queue.unsubscribe('tp', 'tp_b');
-- anything-but never takes a missing attribute; exists false does
SELECT queue.subscribe('tp', 'tp_b', filter_policy => '{"color": [{"anything-but": ["red", "blue"]}]}') > 0;
SELECT queue.subscribe('tp', 'tp_c', filter_policy => '{"color": [{"exists": false}]}') > 0;
SELECT delivered FROM queue.publish('tp', 'green', attributes => '{"color": "green"}');
SELECT delivered FROM queue.publish('tp', 'red', attributes => '{"color": "red"}');
SELECT delivered FROM queue.publish('tp', 'missing', attributes => '{"other": 1}');
SELECT delivered FROM queue.publish('tp', 'none at all');
SELECT delivered FROM queue.publish('tp', 'number 5', attributes => '{"color": 5}');
SELECT pg_temp.drain('tp_b') AS anything_but, pg_temp.drain('tp_c') AS exists_false;
SELECT queue.unsubscribe('tp', 'tp_b'), queue.unsubscribe('tp', 'tp_c');
-- exact numbers, equals-ignore-case, suffix, anything-but prefix, $or, nested attributes
SELECT queue.subscribe('tp', 'tp_b', filter_policy =>
	'{"$or": [{"n": [5]}, {"name": [{"equals-ignore-case": "ALICE"}]}, {"file": [{"suffix": ".png"}]}]}') > 0;
SELECT queue.subscribe('tp', 'tp_c', filter_policy =>
	'{"order": {"region": [{"anything-but": {"prefix": "us-"}}], "total": [{"numeric": [">", 100]}]}}') > 0;
SELECT delivered FROM queue.publish('tp', 'n 5.0', attributes => '{"n": 5.0}');
SELECT delivered FROM queue.publish('tp', 'n "5"', attributes => '{"n": "5"}');
SELECT delivered FROM queue.publish('tp', 'alice', attributes => '{"name": "aLiCe"}');
SELECT delivered FROM queue.publish('tp', 'png', attributes => '{"file": "a.png"}');
SELECT delivered FROM queue.publish('tp', 'eu 150', attributes => '{"order": {"region": "eu-west", "total": 150}}');
SELECT delivered FROM queue.publish('tp', 'us 150', attributes => '{"order": {"region": "us-east", "total": 150}}');
SELECT delivered FROM queue.publish('tp', 'eu 50', attributes => '{"order": {"region": "eu-west", "total": 50}}');
SELECT delivered FROM queue.publish('tp', 'flat', attributes => '{"order": "eu-west"}');
SELECT pg_temp.drain('tp_b') AS or_branches, pg_temp.drain('tp_c') AS nested;
SELECT pg_temp.drain('tp_a') IS NOT NULL;

-- publish_batch: per-message routing keys and attributes, tags for all
SELECT queue.unsubscribe('tp', 'tp_b'), queue.unsubscribe('tp', 'tp_c');
SELECT queue.subscribe('tp', 'tp_b', binding_keys => '{k.b}') > 0;
SELECT ordinal, delivered, duplicate
FROM queue.publish_batch('tp', ARRAY['x', 'y', 'z'], routing_keys => ARRAY['k.b', NULL, 'k.c']);
SELECT pg_temp.drain('tp_a') AS a, pg_temp.drain('tp_b') AS b;
SELECT pg_temp.err($$SELECT queue.publish_batch('tp', ARRAY['x', 'y'], routing_keys => ARRAY['k'])$$) AS length_mismatch;
SELECT pg_temp.err($$SELECT queue.publish_batch('tp', ARRAY['x', NULL])$$) AS null_body;
SELECT pg_temp.err($$SELECT queue.publish_batch('tp', '{}'::text[])$$) AS no_bodies;
SELECT pg_temp.bodies('tp_a') AS nothing_sent_by_errors;
SELECT published > 0 AS counted FROM queue.topics WHERE topic_name = 'tp';
SELECT queue_name, delivered > 0 AS counted FROM queue.subscriptions WHERE topic_name = 'tp' ORDER BY queue_name;

----------------------------------------------------------------------
-- FIFO topics: group required, deduplication at the topic, FIFO queues only
SELECT queue.create_topic('tp_fifo', fifo => true) > 0;
SELECT queue.create('tp_f1', fifo => true) > 0, queue.create('tp_f2', fifo => true, content_based_deduplication => true) > 0;
SELECT pg_temp.err($$SELECT queue.subscribe('tp_fifo', 'tp_a')$$) AS standard_queue_on_fifo_topic;
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_f1')$$) AS fifo_queue_on_standard_topic;
SELECT queue.subscribe('tp_fifo', 'tp_f1') > 0, queue.subscribe('tp_fifo', 'tp_f2') > 0;
SELECT pg_temp.err($$SELECT queue.publish('tp_fifo', 'x')$$) AS no_group;
SELECT pg_temp.err($$SELECT queue.publish('tp_fifo', 'x', message_group_id => 'g', delay => '1 s')$$) AS delay;
SELECT pg_temp.err($$SELECT queue.publish_batch('tp_fifo', ARRAY['x', 'y'], message_group_ids => ARRAY['g', NULL])$$) AS batch_no_group;
CREATE TEMP TABLE first AS
	SELECT * FROM queue.publish('tp_fifo', 'f1', message_group_id => 'g', deduplication_id => 'd1');
SELECT delivered, duplicate FROM first;
SELECT p.message_id = f.message_id AS original_id, p.delivered, p.duplicate
FROM queue.publish('tp_fifo', 'f1 again', message_group_id => 'g', deduplication_id => 'd1') p, first f;
-- without an id the body's SHA-256 deduplicates
SELECT delivered, duplicate FROM queue.publish('tp_fifo', 'same body', message_group_id => 'g');
SELECT delivered, duplicate FROM queue.publish('tp_fifo', 'same body', message_group_id => 'h');
SELECT ordinal, delivered, duplicate FROM queue.publish_batch('tp_fifo', ARRAY['b1', 'b2', 'b3'],
	message_group_ids => ARRAY['g', 'h', 'g'], deduplication_ids => ARRAY['e1', 'e2', 'e1']);
-- each subscribed queue has the groups in publish order
SELECT string_agg(body || '/' || message_group_id, ',' ORDER BY sequence_number) AS f1
FROM queue.peek('tp_f1', 100);
SELECT string_agg(body || '/' || message_group_id, ',' ORDER BY sequence_number) AS f2
FROM queue.peek('tp_f2', 100);
-- a rolled-back publish frees its deduplication id
BEGIN;
SELECT delivered FROM queue.publish('tp_fifo', 'r', message_group_id => 'g', deduplication_id => 'rb');
ROLLBACK;
SELECT delivered, duplicate FROM queue.publish('tp_fifo', 'r', message_group_id => 'g', deduplication_id => 'rb');

----------------------------------------------------------------------
-- privileges: publish is enough to publish; subscribing needs manage on
-- the topic and send on the queue; a revoke of send from the
-- subscription's owner stops deliveries to that queue
CREATE ROLE queue_test_topics_owner;
CREATE ROLE queue_test_topics_pub;
CREATE ROLE queue_test_topics_nobody;
GRANT USAGE ON SCHEMA queue TO queue_test_topics_owner, queue_test_topics_pub, queue_test_topics_nobody;
DO $$
BEGIN
	EXECUTE format('GRANT CREATE ON DATABASE %I TO queue_test_topics_owner', current_database());
END
$$;
SET ROLE queue_test_topics_owner;
SELECT queue.create_topic('tp_acl') > 0, queue.create('tp_acl_q') > 0;
SELECT queue.subscribe('tp_acl', 'tp_acl_q') > 0;
SELECT queue.grant_topic('tp_acl', 'queue_test_topics_pub', '{publish}');
SELECT pg_temp.err($$SELECT queue.subscribe('tp', 'tp_acl_q')$$) AS no_manage_on_topic;
SELECT pg_temp.err($$SELECT queue.subscribe('tp_acl', 'tp_a')$$) AS no_send_on_queue;
SELECT topic_name FROM queue.topics ORDER BY 1;
SELECT topic_name, queue_name FROM queue.subscriptions ORDER BY 1, 2;
SET ROLE queue_test_topics_pub;
SELECT delivered FROM queue.publish('tp_acl', 'by publisher');
SELECT pg_temp.err($$SELECT queue.send('tp_acl_q', 'direct')$$) AS no_send_on_queue;
SELECT pg_temp.err($$SELECT queue.subscribe('tp_acl', 'tp_acl_q')$$) AS publish_is_not_manage;
SELECT pg_temp.err($$SELECT queue.grant_topic('tp_acl', 'queue_test_topics_nobody', '{publish}')$$) AS publisher_cannot_grant;
SELECT topic_name FROM queue.topics;
CREATE TEMP TABLE acl_topic AS SELECT topic_id FROM queue.topics WHERE topic_name = 'tp_acl';
GRANT SELECT ON acl_topic TO queue_test_topics_nobody;
SET ROLE queue_test_topics_nobody;
SELECT pg_temp.err($$SELECT queue.publish('tp_acl', 'x')$$) AS no_publish;
SELECT pg_temp.err($$SELECT queue.drop_topic('tp_acl')$$) AS no_manage;
SELECT pg_temp.err($$SELECT queue.unsubscribe('tp_acl', 'tp_acl_q')$$) AS no_manage_unsubscribe;
SELECT count(*) AS sees_no_topic FROM queue.topics;
SELECT count(*) AS sees_no_subscription FROM queue.subscriptions;
SELECT pg_temp.err($$SELECT queue._topic_holds(1, 10, 'any')$$) AS helper_refused;
SELECT pg_temp.err(format('SELECT queue._topic_counter(%s, NULL, NULL)', (SELECT topic_id FROM acl_topic)))
	AS counter_refused;
RESET ROLE;
SELECT pg_temp.drain('tp_acl_q') AS delivered_by_subscription;
-- the subscription's owner loses send: the publish skips that queue
SELECT queue.create('tp_acl_other') > 0;
SELECT queue.grant('tp_acl_other', 'queue_test_topics_owner', '{send}');
SET ROLE queue_test_topics_owner;
SELECT queue.subscribe('tp_acl', 'tp_acl_other') > 0;
RESET ROLE;
SELECT delivered FROM queue.publish('tp_acl', 'both');
SELECT queue.revoke('tp_acl_other', 'queue_test_topics_owner', '{send}');
SELECT delivered FROM queue.publish('tp_acl', 'owned queue only');
SELECT pg_temp.drain('tp_acl_other') AS other, pg_temp.drain('tp_acl_q') AS owned;
SELECT queue.revoke_topic('tp_acl', 'queue_test_topics_pub', '{publish}');
SET ROLE queue_test_topics_pub;
SELECT pg_temp.err($$SELECT queue.publish('tp_acl', 'x')$$) AS revoked;
RESET ROLE;
SELECT pg_temp.err($$SELECT queue.grant_topic('tp_acl', 'queue_test_topics_pub', '{send}')$$) AS queue_privilege_on_topic;
SELECT pg_temp.err($$SELECT queue.grant_topic('tp_acl', 'no_such_role', '{publish}')$$) AS unknown_role;
SELECT pg_temp.err($$SELECT queue.grant_topic('nope', 'queue_test_topics_pub', '{publish}')$$) AS unknown_topic;

----------------------------------------------------------------------
-- a subscription goes with its queue; drop_topic never drops queues
SELECT queue.drop('tp_c');
SELECT count(*) AS tp_c_subscriptions FROM queue.subscriptions WHERE queue_name = 'tp_c';
SELECT delivered FROM queue.publish('tp', 'after drop');
SELECT queue.drop_topic('tp');
SELECT pg_temp.err($$SELECT queue.drop_topic('tp')$$) AS dropped;
SELECT queue.drop_topic('tp', if_exists => true) AS if_exists;
SELECT count(*) AS queues_kept FROM queue.queues WHERE queue_name IN ('tp_a', 'tp_b', 'tp');
SELECT count(*) AS subscriptions_left FROM queue.subscriptions WHERE topic_name = 'tp';
SELECT pg_temp.err($$SELECT queue.publish('tp', 'x')$$) AS unknown_after_drop;
-- DROP OWNED drops the role's topics (and their subscriptions)
DROP OWNED BY queue_test_topics_owner;
SELECT count(*) AS acl_topic_gone FROM queue.topics WHERE topic_name = 'tp_acl';
SELECT count(*) AS its_subscriptions_gone FROM queue.subscriptions WHERE topic_name = 'tp_acl';
DROP OWNED BY queue_test_topics_pub, queue_test_topics_nobody;
DROP ROLE queue_test_topics_owner, queue_test_topics_pub, queue_test_topics_nobody;
SELECT queue.drop_topic('tp_fifo');
SELECT queue.drop(q) FROM unnest(ARRAY['tp', 'tp_a', 'tp_b', 'tp_f1', 'tp_f2', 'tp_acl_other']) q;
