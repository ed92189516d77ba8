-- queue.message_uuid / queue.message_id (1.7): a message id as the SQS
-- endpoint's MessageId (a UUID) and back, one stable mapping
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS queue;
RESET client_min_messages;
SELECT queue.message_uuid(1) AS one,
       queue.message_uuid(57) AS fifty_seven,
       queue.message_uuid(9223372036854775807) AS max;
-- a version-4 UUID of RFC 4122's variant, whatever the id
SELECT substr(queue.message_uuid(id)::text, 15, 1) = '4'
   AND substr(queue.message_uuid(id)::text, 20, 1) = '8' AS v4
FROM (VALUES (1::bigint), (281474976710656), (9223372036854775807)) v(id);
-- and back: every id, including those past 48 bits
SELECT bool_and(queue.message_id(queue.message_uuid(id)) = id) AS round_trip
FROM (SELECT (2::numeric ^ g - 1)::bigint AS id FROM generate_series(1, 63) g
      UNION ALL SELECT generate_series(1, 1000)) ids;
-- a UUID that is no message id of ours: null (usable in WHERE)
SELECT queue.message_id('6f1b8c3e-2a4d-4b7e-9c1f-0a2b3c4d5e6f') IS NULL AS not_ours,
       queue.message_id(NULL) IS NULL AS null_in;
-- a real message, seen by its uuid
SELECT queue.create('uuid_q') > 0 AS created;
SELECT (queue.send('uuid_q', 'hello')).message_id > 0 AS sent;
SELECT m.body, queue.message_id(queue.message_uuid(m.message_id)) = m.message_id AS same
FROM queue.peek('uuid_q') m;
SELECT queue.drop('uuid_q');
