-- A topic, publish of one message.  Variables: :topic, :body.
SELECT message_id FROM queue.publish(:topic, :body::text);
