-- A topic, publish of one message tagged 'hit' (the one subscription that
-- matches in topics.sh's filter case).  Variables: :topic, :body.
SELECT message_id FROM queue.publish(:topic, :body::text, tags => '{hit}');
