#!/usr/bin/node
// FIFO consumer: each message group is processed in send order.
//
// A FIFO queue delivers a group's messages in the order their sends
// committed, and no other receive gets a group while one of its messages is
// in flight.  The producer side shows deduplication ids; the consumer side
// shows receive_attempt_id, which recovers a receive whose reply was lost
// (a dropped connection, a client-side timeout): retried with the same id,
// the receive returns the same messages with the same receipts instead of
// leaving them leased to nobody.
'use strict';
const { Client } = require('pg');
const assert = require('node:assert/strict');

const QUEUE = 'node.payments.fifo';
const ACCOUNTS = ['alice', 'bob', 'carol'];

async function main() {
  const client = new Client({ connectionString: process.env.DATABASE_URL, statement_timeout: 30000 });
  await client.connect();
  try {
    await client.query('SELECT queue.drop($1, if_exists => true)', [QUEUE]);
    await client.query('SELECT queue.create($1, fifo => true)', [QUEUE]);

    // Producer: three accounts, interleaved; each event carries its group
    // (the account) and a deduplication id.  Arrays need explicit casts:
    // send_batch exists for text[] and jsonb[] bodies.
    const events = [];
    for (let step = 1; step <= 4; step++) for (const acct of ACCOUNTS) events.push([acct, step]);
    await client.query(
      'SELECT count(*) FROM queue.send_batch($1, $2::text[], message_group_ids => $3::text[],' +
      ' deduplication_ids => $4::text[])',
      [QUEUE, events.map(([a, s]) => `${a}:${s}`), events.map(([a]) => a), events.map(([a, s]) => `${a}-${s}`)]);
    // A retried send (the producer did not see its reply) is a duplicate:
    // nothing is enqueued and the original message id comes back.
    const dup = await client.query(
      "SELECT duplicate FROM queue.send($1, 'alice:1', message_group_id => 'alice', deduplication_id => 'alice-1')",
      [QUEUE]);
    assert.equal(dup.rows[0].duplicate, true);

    // receive_attempt_id: pretend the first reply was lost, and retry.
    const recv = 'SELECT message_id, receipt, body, message_group_id FROM queue.receive($1,' +
      " max_messages => 3, wait => '1 s', receive_attempt_id => $2)";
    const first = (await client.query(recv, [QUEUE, 'worker-1:receive-1'])).rows;
    const again = (await client.query(recv, [QUEUE, 'worker-1:receive-1'])).rows;
    assert.equal(again.length, 3);
    assert.deepEqual(again, first);            // same messages, same receipts

    const seen = {};
    const settle = async (batch) => {
      for (const m of batch) {
        const [acct, step] = m.body.split(':'); // bodies come back as text
        assert.equal(acct, m.message_group_id);
        (seen[acct] ??= []).push(Number(step));
        await client.query('SELECT queue.delete($1, $2)', [QUEUE, m.receipt]);
      }
    };
    await client.query('BEGIN');
    await settle(again);
    await client.query('COMMIT');
    for (;;) {
      await client.query('BEGIN');             // receive, work, delete: one transaction
      const { rows: batch } = await client.query(
        "SELECT message_id, receipt, body, message_group_id FROM queue.receive($1, max_messages => 3, wait => '1 s')",
        [QUEUE]);
      await settle(batch);
      await client.query('COMMIT');
      if (batch.length === 0) break;
    }

    for (const acct of ACCOUNTS) assert.deepEqual(seen[acct], [1, 2, 3, 4], acct);
    console.log(`fifo_consumer: 12 messages, each group in order: ${JSON.stringify(seen)}`);
  } finally {
    await client.end();
  }
}

main().catch((err) => {
  console.error('fifo_consumer.js: FAILED:', err);
  process.exit(1);
});
