-- topic_safety: matching never fails a publish and is linear in the key and
-- the filter, and a publish's delay obeys each delivered queue's retention
-- as send's does (DESIGN.md "Topics").  (1) binding keys run as an
-- automaton over words, not by backtracking: a binding of fourteen '#'
-- against a 24-word key that does not match finishes at once (the old
-- matcher took minutes and could not be cancelled), and a table of tricky
-- cases gives the right answers; (2) a number beyond double precision does
-- not match a numeric condition, and the publish still delivers to
-- everyone else; (3) a delay not within a delivered queue's retention is
-- 22023 naming the queue, and delivers nothing anywhere.  Output is
-- counts, bodies, booleans and SQLSTATEs, never ids or times.
CREATE EXTENSION IF NOT EXISTS queue;
SET client_min_messages = warning;

CREATE FUNCTION pg_temp.err(cmd text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE cmd;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;
-- the bodies a queue holds, in delivery order
CREATE FUNCTION pg_temp.bodies(q text) RETURNS text LANGUAGE sql AS $$
	SELECT coalesce(string_agg(body, ',' ORDER BY message_id), '') FROM queue.peek(q, 100)
$$;

----------------------------------------------------------------------
-- (1) binding keys: a binding that would backtrack exponentially
SET statement_timeout = '5s';
SELECT queue.create_topic('ts_path') > 0, queue.create('ts_path_q') > 0;
SELECT queue.subscribe('ts_path', 'ts_path_q',
					   binding_keys => ARRAY[repeat('#.', 14) || 'z']) > 0 AS fourteen_hashes;
SELECT length(repeat('a.', 23) || 'b') AS key_chars;
SELECT delivered FROM queue.publish('ts_path', 'no match', routing_key => repeat('a.', 23) || 'b');
SELECT delivered FROM queue.publish('ts_path', 'match', routing_key => repeat('a.', 23) || 'z');
-- five such bindings, a batch of ten such keys
SELECT queue.unsubscribe('ts_path', 'ts_path_q');
SELECT queue.subscribe('ts_path', 'ts_path_q', binding_keys => ARRAY[
	repeat('#.', 14) || 'z', repeat('#.', 13) || 'y.#', repeat('#.*.', 7) || 'x',
	'#.' || repeat('a.#.', 9) || 'w', repeat('*.#.', 10) || 'v']) > 0 AS five_bindings;
SELECT sum(delivered) AS delivered
FROM queue.publish_batch('ts_path', array_fill('x'::text, ARRAY[10]),
						 routing_keys => array_fill(repeat('a.', 23) || 'b', ARRAY[10]));
SELECT pg_temp.bodies('ts_path_q') AS path_q;

-- tricky cases: each pattern is the one binding of its own topic and queue
CREATE TEMP TABLE bind_cases (n serial, pattern text, routing_key text, expected bool);
INSERT INTO bind_cases (pattern, routing_key, expected) VALUES
	('#', 'a', true), ('#', 'a.b.c', true),
	('#.#', 'a', true), ('#.#', 'a.b', true),
	('*.#.*', 'a', false), ('*.#.*', 'a.b', true), ('*.#.*', 'a.b.c', true), ('*.#.*', 'a.b.c.d', true),
	('#.z', 'z', true), ('#.z', 'a.z', true), ('#.z', 'a.b.z', true), ('#.z', 'z.a', false), ('#.z', 'az', false),
	('a.#', 'a', true), ('a.#', 'a.b', true), ('a.#', 'a.b.c', true), ('a.#', 'b.a', false), ('a.#', 'ab', false),
	('#.a.#', 'a', true), ('#.a.#', 'x.a.y', true), ('#.a.#', 'b.a', true), ('#.a.#', 'x.y', false),
	('a.#.b', 'a.b', true), ('a.#.b', 'a.x.y.b', true), ('a.#.b', 'a.b.b', true), ('a.#.b', 'a.b.x', false),
	('#.*', 'a', true), ('#.*', 'a.b.c', true),
	('*.*.#', 'a', false), ('*.*.#', 'a.b', true), ('*.*.#', 'a.b.c', true),
	('*', 'a', true), ('*', 'a.b', false),
	('a.*', 'a', false), ('a.*', 'a.b', true), ('a.*', 'a.b.c', false),
	('a.b.c', 'a.b', false), ('a.b.c', 'a.b.c', true), ('a.b.c', 'a.b.c.d', false), ('a.b.c', 'a.b.d', false),
	('a*', 'ab', false), ('a*', 'a*', true), ('a#', 'a', false), ('a#', 'a#', true),
	(repeat('#.', 14) || 'z', repeat('a.', 23) || 'b', false),
	(repeat('#.', 14) || 'z', repeat('a.', 23) || 'z', true),
	(repeat('#.', 14) || 'z', 'z', true);
CREATE TEMP TABLE bind_topics AS
	SELECT pattern, 'tsb_' || dense_rank() OVER (ORDER BY pattern) AS topic
	FROM (SELECT DISTINCT pattern FROM bind_cases) p;
SELECT count(*) AS topics_made
FROM bind_topics, queue.create_topic(topic) t, queue.create(topic) q,
	queue.subscribe(topic, topic, binding_keys => ARRAY[pattern]) s;
SELECT c.pattern, c.routing_key, c.expected, p.delivered = 1 AS matched
FROM bind_cases c JOIN bind_topics b USING (pattern),
	LATERAL queue.publish(b.topic, 'x', routing_key => c.routing_key) p
ORDER BY c.n;
-- empty words never reach the matcher: refused in bindings and keys
SELECT pg_temp.err($$SELECT queue.subscribe('ts_path', 'ts_path_q', binding_keys => '{#.}')$$) AS binding_trailing_dot;
SELECT pg_temp.err($$SELECT queue.subscribe('ts_path', 'ts_path_q', binding_keys => '{.#}')$$) AS binding_leading_dot;
SELECT pg_temp.err($$SELECT queue.publish('ts_path', 'x', routing_key => 'a..b')$$) AS key_empty_word;
SELECT pg_temp.err($$SELECT queue.publish('ts_path', 'x', routing_key => '.')$$) AS key_only_dot;
RESET statement_timeout;

-- a long "anything-but" list against a long array attribute: sorted once
-- and searched, never compared pairwise (the old matcher also copied the
-- whole list for every element)
SET statement_timeout = '5s';
SELECT queue.create_topic('ts_but') > 0, queue.create('ts_but_q') > 0;
SELECT queue.subscribe('ts_but', 'ts_but_q', filter_policy => jsonb_build_object('v', jsonb_build_array(
	jsonb_build_object('anything-but', (SELECT jsonb_agg('s' || i) FROM generate_series(1, 20000) i))))) > 0;
SELECT delivered FROM queue.publish('ts_but', 'all listed', attributes => jsonb_build_object('v',
	(SELECT jsonb_agg('s' || i) FROM generate_series(1, 20000) i)));
SELECT delivered FROM queue.publish('ts_but', 'one not listed', attributes => jsonb_build_object('v',
	(SELECT jsonb_agg('s' || i) FROM generate_series(1, 20000) i) || '["s0"]'));
SELECT delivered FROM queue.publish('ts_but', 'scalar listed', attributes => '{"v": "s77"}');
SELECT delivered FROM queue.publish('ts_but', 'scalar not listed', attributes => '{"v": "s20001"}');
RESET statement_timeout;
-- the sorted search agrees with equality: numbers by value, types apart
SELECT queue.unsubscribe('ts_but', 'ts_but_q');
SELECT queue.subscribe('ts_but', 'ts_but_q', filter_policy =>
	'{"v": [{"anything-but": ["a", 5, "b", 1.5, "c", -2, "d", "5", "e", 1000000000]}]}') > 0;
SELECT delivered FROM queue.publish('ts_but', '[5.0,"a",-2]', attributes => '{"v": [5.0, "a", -2]}');
SELECT delivered FROM queue.publish('ts_but', '["e","5",1.50]', attributes => '{"v": ["e", "5", 1.50]}');
SELECT delivered FROM queue.publish('ts_but', '["a",6]', attributes => '{"v": ["a", 6]}');
SELECT delivered FROM queue.publish('ts_but', '["a",true]', attributes => '{"v": ["a", true]}');
SELECT delivered FROM queue.publish('ts_but', '["a","A"]', attributes => '{"v": ["a", "A"]}');
SELECT delivered FROM queue.publish('ts_but', '[1e400]', attributes => '{"v": [1e400]}');
SELECT delivered FROM queue.publish('ts_but', '[[6],{"x":6},"a"]', attributes => '{"v": [[6], {"x": 6}, "a"]}');
SELECT pg_temp.bodies('ts_but_q') AS anything_but;

----------------------------------------------------------------------
-- (2) a number beyond double precision matches no numeric condition; the
-- other subscribers still get the message
SELECT queue.create_topic('ts_num') > 0;
SELECT queue.create('ts_num_all') > 0, queue.create('ts_num_range') > 0,
	queue.create('ts_num_eq') > 0, queue.create('ts_num_but') > 0;
SELECT queue.subscribe('ts_num', 'ts_num_all') > 0 AS unfiltered;
SELECT queue.subscribe('ts_num', 'ts_num_range', filter_policy => '{"n": [{"numeric": [">", 0]}]}') > 0 AS numeric;
SELECT queue.subscribe('ts_num', 'ts_num_eq', filter_policy => '{"n": [5]}') > 0 AS exact;
SELECT queue.subscribe('ts_num', 'ts_num_but', filter_policy => '{"n": [{"anything-but": [5, 6]}]}') > 0 AS anything_but;
SELECT delivered FROM queue.publish('ts_num', '1e400', attributes => '{"n": 1e400}');
SELECT delivered FROM queue.publish('ts_num', '-1e400', attributes => '{"n": -1e400}');
SELECT delivered FROM queue.publish('ts_num', '1e-400', attributes => '{"n": 1e-400}');
SELECT delivered FROM queue.publish('ts_num', '[1e400,7]', attributes => '{"n": [1e400, 7]}');
SELECT delivered FROM queue.publish('ts_num', 'max double', attributes => '{"n": 1.7976931348623157e308}');
SELECT delivered FROM queue.publish('ts_num', '5', attributes => '{"n": 5}');
SELECT delivered FROM queue.publish('ts_num', '0', attributes => '{"n": 0}');
SELECT pg_temp.bodies('ts_num_all') AS unfiltered;
SELECT pg_temp.bodies('ts_num_range') AS numeric_gt_0;
SELECT pg_temp.bodies('ts_num_eq') AS exact_5;
SELECT pg_temp.bodies('ts_num_but') AS anything_but_5_6;
-- the same in a batch, which a failing match would fail as a whole
SELECT ordinal, delivered FROM queue.publish_batch('ts_num', ARRAY['b1', 'b2'],
	attributes => ARRAY['{"n": 1e400}', '{"n": 3}']::jsonb[]) ORDER BY ordinal;
-- a policy's own number beyond double precision is a bad filter (22023)
SELECT pg_temp.err($$SELECT queue.subscribe('ts_num', 'ts_path_q', filter_policy => '{"n": [1e400]}')$$) AS policy_1e400;
SELECT pg_temp.err($$SELECT queue.subscribe('ts_num', 'ts_path_q', filter_policy => '{"n": [{"numeric": ["<", -1e400]}]}')$$) AS numeric_bound_1e400;

----------------------------------------------------------------------
-- (3) a publish's delay obeys each delivered queue's retention, as send's
SELECT queue.create_topic('ts_delay') > 0;
SELECT queue.create('ts_delay_long') > 0, queue.create('ts_delay_short', retention => '1 minute') > 0;
SELECT queue.subscribe('ts_delay', 'ts_delay_long') > 0 AS long_first;
SELECT queue.subscribe('ts_delay', 'ts_delay_short', filter_tags => '{short}') > 0 AS short_tagged;
-- send refuses the delay; so does a publish delivering to that queue
SELECT pg_temp.err($$SELECT queue.send('ts_delay_short', 'x', delay => '2 minutes')$$) AS send;
SELECT pg_temp.err($$SELECT queue.publish('ts_delay', 'x', tags => '{short}', delay => '2 minutes')$$) AS publish;
-- the error reaches the client and undoes the whole statement
\set VERBOSITY sqlstate
SELECT delivered FROM queue.publish('ts_delay', 'x', tags => '{short}', delay => '1 day');
\set VERBOSITY default
-- nothing delivered anywhere, nothing counted
SELECT pg_temp.bodies('ts_delay_long') AS long_q, pg_temp.bodies('ts_delay_short') AS short_q;
SELECT published FROM queue.topics WHERE topic_name = 'ts_delay';
SELECT queue_name, delivered FROM queue.subscriptions WHERE topic_name = 'ts_delay' ORDER BY queue_name;
-- a queue the message does not go to does not bound the delay
SELECT delivered FROM queue.publish('ts_delay', 'untagged 2 min', delay => '2 minutes');
-- up to the retention, as send allows
SELECT pg_temp.err($$SELECT queue.send('ts_delay_short', 'sent 1 min', delay => '1 minute')$$) AS send_at_retention;
SELECT delivered FROM queue.publish('ts_delay', 'short 1 min', tags => '{short}', delay => '1 minute');
SELECT delivered FROM queue.publish('ts_delay', 'short 30 s', tags => '{short}', delay => '30 seconds');
SELECT pg_temp.bodies('ts_delay_long') AS long_q, pg_temp.bodies('ts_delay_short') AS short_q;

----------------------------------------------------------------------
SELECT count(*) AS topics_dropped
FROM (SELECT queue.drop_topic(topic_name) FROM queue.topics WHERE topic_name LIKE 'ts%') d;
SELECT count(*) AS queues_dropped
FROM (SELECT queue.drop(queue_name) FROM queue.queues WHERE queue_name LIKE 'ts%') d;
