#!/usr/bin/node
// Outbox producer: the business row and its message commit together.
//
// The order and the message describing it are written in ONE transaction,
// so the message exists if and only if the order does.  A transaction that
// fails after the send leaves no message.
//
// Run:  DATABASE_URL=postgresql:///mydb node outbox_producer.js
//       (or set PGHOST, PGPORT, PGDATABASE, PGUSER as for psql)
// Needs node-postgres (npm ci in this folder).  Exits non-zero on failure.
'use strict';
const { Client } = require('pg');
const assert = require('node:assert/strict');

const QUEUE = 'node.outbox';

async function placeOrder(client, orderId, item, failAfterSend = false) {
  await client.query('BEGIN');
  try {
    await client.query('INSERT INTO node_orders (order_id, item) VALUES ($1, $2)', [orderId, item]);
    // A JS object needs an explicit ::jsonb cast: without it the parameter
    // has no type, and PostgreSQL picks the TEXT overload of queue.send, so
    // the body is stored as JSON.stringify's text, not jsonb's normalised
    // text (content-based deduplication would then hash another string).
    const { rows } = await client.query(
      'SELECT message_id FROM queue.send($1, $2::jsonb)', [QUEUE, { order_id: orderId, item }]);
    if (failAfterSend) throw new Error('payment service down');
    await client.query('COMMIT');
    return rows[0].message_id;   // a bigint comes back as a STRING: '42'
  } catch (err) {
    await client.query('ROLLBACK');   // the order and its message are both gone
    throw err;
  }
}

async function main() {
  // With no connectionString, node-postgres reads PGHOST, PGPORT, ...
  const client = new Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  try {
    await client.query('DROP TABLE IF EXISTS node_orders');
    await client.query('CREATE TABLE node_orders (order_id bigint PRIMARY KEY, item text NOT NULL)');
    await client.query('SELECT queue.drop($1, if_exists => true)', [QUEUE]);
    await client.query('SELECT queue.create($1)', [QUEUE]);

    const ids = [await placeOrder(client, 1, 'book'), await placeOrder(client, 2, 'pen')];
    await assert.rejects(placeOrder(client, 3, 'lamp', true), /payment service down/);

    // A batch: an array parameter needs an explicit cast, because send_batch
    // has a text[] and a jsonb[] overload (42725 "is not unique" otherwise).
    await client.query('BEGIN');
    await client.query("INSERT INTO node_orders VALUES (4, 'cup'), (5, 'mug')");
    const batch = await client.query(
      'SELECT ordinal, message_id FROM queue.send_batch($1, $2::jsonb[])',
      [QUEUE, [JSON.stringify({ order_id: 4, item: 'cup' }), JSON.stringify({ order_id: 5, item: 'mug' })]]);
    await client.query('COMMIT');
    ids.push(...batch.rows.map((r) => r.message_id));

    // Check: exactly the committed orders have messages, in order.
    const orders = (await client.query('SELECT order_id FROM node_orders ORDER BY order_id')).rows
      .map((r) => r.order_id);
    const msgs = (await client.query(
      'SELECT message_id, body FROM queue.peek($1, max_messages => 100)', [QUEUE])).rows;
    assert.deepEqual(orders, ['1', '2', '4', '5']);            // bigint: strings
    assert.ok(ids.every((id) => typeof id === 'string'));     // message ids too
    assert.deepEqual(msgs.map((m) => m.message_id), ids);
    // Bodies come back as text, whichever overload sent them: parse them.
    assert.ok(msgs.every((m) => typeof m.body === 'string'));
    assert.deepEqual(msgs.map((m) => JSON.parse(m.body).order_id), [1, 2, 4, 5]);
    // jsonb's normalised text (a space after ':'), so the ::jsonb cast took.
    assert.equal(msgs[0].body, '{"item": "book", "order_id": 1}');
    // Convert ids with BigInt() when you need numbers: they may pass 2^53.
    assert.ok(BigInt(ids[1]) > BigInt(ids[0]));
    console.log(`outbox_producer: ${orders.length} orders, ${msgs.length} messages, rolled-back order 3 left none`);
  } finally {
    await client.end();
  }
}

main().catch((err) => {
  console.error('outbox_producer.js: FAILED:', err);
  process.exit(1);
});
