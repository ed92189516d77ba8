#!/usr/bin/node
// Topic publisher: one publish, delivered to every subscribed queue whose
// filters match, inside the publisher's transaction (all queues or none).
//
// billing subscribes to everything; shipping_eu only to messages tagged
// "eu" whose "total" attribute is positive (an SNS filter policy).
'use strict';
const { Client } = require('pg');
const assert = require('node:assert/strict');

const TOPIC = 'node.orders';
const BILLING = 'node.billing';
const SHIPPING_EU = 'node.shipping_eu';

async function main() {
  const client = new Client({ connectionString: process.env.DATABASE_URL, statement_timeout: 30000 });
  await client.connect();
  try {
    await client.query('SELECT queue.drop_topic($1, if_exists => true)', [TOPIC]);
    for (const q of [BILLING, SHIPPING_EU]) {
      await client.query('SELECT queue.drop($1, if_exists => true)', [q]);
      await client.query('SELECT queue.create($1)', [q]);
    }
    await client.query('SELECT queue.create_topic($1)', [TOPIC]);
    await client.query('SELECT queue.subscribe($1, $2)', [TOPIC, BILLING]);
    await client.query(
      "SELECT queue.subscribe($1, $2, filter_tags => '{eu}', filter_policy => $3::jsonb)",
      [TOPIC, SHIPPING_EU, { total: [{ numeric: ['>', 0] }] }]);

    // Objects as jsonb need ::jsonb (else the text overload of publish);
    // a JS array as text[] needs ::text[].
    const publish = 'SELECT message_id, delivered FROM queue.publish($1, $2::jsonb, tags => $3::text[],' +
      ' attributes => $4::jsonb)';
    const delivered = {};
    for (const [orderId, region, total] of [[1, 'eu', 99.5], [2, 'us', 10], [3, 'eu', 0]]) {
      await client.query('BEGIN');             // publish with the business write, as an outbox
      const { rows } = await client.query(publish, [TOPIC, { order_id: orderId }, [region], { total }]);
      await client.query('COMMIT');
      delivered[orderId] = rows[0].delivered;  // int4: a number
    }
    // A publish that rolls back delivers nothing anywhere.
    await client.query('BEGIN');
    await client.query(publish, [TOPIC, { order_id: 4 }, ['eu'], { total: 5 }]);
    await client.query('ROLLBACK');
    assert.deepEqual(delivered, { 1: 2, 2: 1, 3: 1 });

    const drain = async (queueName) => {
      const { rows } = await client.query(
        "SELECT body, queue.delete($1, receipt) FROM queue.receive($1, max_messages => 10, wait => '1 s')",
        [queueName]);
      return rows.map((r) => JSON.parse(r.body).order_id).sort();
    };
    const billing = await drain(BILLING);
    const shipping = await drain(SHIPPING_EU);
    assert.deepEqual(billing, [1, 2, 3]);
    assert.deepEqual(shipping, [1]);
    console.log(`topic_publisher: billing got ${JSON.stringify(billing)}, shipping_eu got ${JSON.stringify(shipping)}`);
  } finally {
    await client.end();
  }
}

main().catch((err) => {
  console.error('topic_publisher.js: FAILED:', err);
  process.exit(1);
});
