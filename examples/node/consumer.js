#!/usr/bin/node
// Long-polling, exactly-once consumer with a dead-letter queue and a
// graceful shutdown.
//
// Each batch is one transaction: receive (long poll), do the work in this
// database, delete.  The work and the delete commit together, so each
// message's effect happens exactly once.  Each message's work runs under a
// savepoint: a handler error rolls back that message's work only, and the
// message is handed back with change_visibility(0); its receive has counted,
// so after max_receive_count failures the next receive moves it to the
// dead-letter queue.  (Without savepoints a plain ROLLBACK gives the same
// rule for the whole batch: the extension counts rolled-back receives, see
// docs/dead-letters.md, "Rolled-back receives"; but one poison message would then take its
// neighbours to the dead-letter queue with it.)
//
// SIGINT (Ctrl-C) does not interrupt a batch: the batch in hand is finished
// and committed, then the loop exits.  A shutdown takes at most the
// long-poll wait plus one batch.
//
// As a self-test, the program seeds its queue, sends itself SIGINT from the
// middle of a batch, checks that batch committed, starts the loop again
// until the queue is drained, and checks the results.
'use strict';
const { Client } = require('pg');
const assert = require('node:assert/strict');

const QUEUE = 'node.jobs';
const DLQ = 'node.jobs_dlq';
const MAX_RECEIVE_COUNT = 3;

let stopping = false;
let signalled = false;

// The business work: here, one row per job.
async function handle(client, msg) {
  const job = JSON.parse(msg.body);            // bodies come back as text
  if (job.poison) throw new Error(`cannot process job ${job.n}`);
  await client.query('INSERT INTO node_done (n, message_id) VALUES ($1, $2)', [job.n, msg.message_id]);
  if (job.n === 9 && !signalled) {
    signalled = true;
    process.kill(process.pid, 'SIGINT');       // self-test: Ctrl-C mid-batch
  }
}

// The consumer loop.  Returns the message ids of the last batch.
async function run(client, { drain = false } = {}) {
  stopping = false;
  let last = [];
  while (!stopping) {
    await client.query('BEGIN');
    try {
      const { rows: batch } = await client.query(
        "SELECT message_id, receipt, body FROM queue.receive($1, max_messages => 5, wait => '2 s')",
        [QUEUE]);
      if (batch.length === 0 && drain) {
        await client.query('COMMIT');
        return last;                           // self-test: the queue is empty
      }
      for (const msg of batch) {
        await client.query('SAVEPOINT msg');
        try {
          await handle(client, msg);
          await client.query('SELECT queue.delete($1, $2)', [QUEUE, msg.receipt]);
          await client.query('RELEASE SAVEPOINT msg');
        } catch (err) {
          // Work undone; hand the message back now.  Its receive counted:
          // after MAX_RECEIVE_COUNT it goes to the dead-letter queue.
          console.log(`consumer: ${err.message}, message ${msg.message_id} back to the queue`);
          await client.query('ROLLBACK TO SAVEPOINT msg');
          await client.query("SELECT queue.change_visibility($1, $2, '0')", [QUEUE, msg.receipt]);
        }
      }
      await client.query('COMMIT');            // the work and deletes of the whole batch
      last = batch.map((m) => m.message_id);   // bigint ids: strings
    } catch (err) {
      // Anything else (a lost connection, a bug): the whole batch rolls back
      // and comes back counted, by the extension's rule.
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    }
  }
  return last;
}

async function main() {
  // statement_timeout must be longer than the longest wait, or a long poll
  // is cancelled (57014) before it can return.  Do NOT set query_timeout
  // (client side) instead: it abandons a receive the server still completes,
  // leasing messages nobody reads until their visibility timeout ends.
  const client = new Client({ connectionString: process.env.DATABASE_URL, statement_timeout: 30000 });
  await client.connect();
  try {
    await client.query('DROP TABLE IF EXISTS node_done');
    await client.query('CREATE TABLE node_done (n int PRIMARY KEY, message_id bigint NOT NULL)');
    await client.query('SELECT queue.drop($1, if_exists => true)', [QUEUE]);
    await client.query('SELECT queue.drop($1, if_exists => true)', [DLQ]);
    await client.query('SELECT queue.create($1)', [DLQ]);
    await client.query(
      "SELECT queue.create($1, visibility_timeout => '30 s', dead_letter_queue => $2, max_receive_count => $3)",
      [QUEUE, DLQ, MAX_RECEIVE_COUNT]);
    const jobs = Array.from({ length: 12 }, (_, i) => JSON.stringify({ n: i + 1, poison: i + 1 === 4 }));
    await client.query('SELECT count(*) FROM queue.send_batch($1, $2::jsonb[])', [QUEUE, jobs]);

    const onSigint = () => {
      stopping = true;                         // checked between batches only
      console.log('consumer: SIGINT, finishing the batch in hand');
    };
    process.on('SIGINT', onSigint);
    const inHand = await run(client);
    assert.ok(stopping, 'the loop stopped on SIGINT');
    const done = new Set((await client.query('SELECT message_id FROM node_done')).rows.map((r) => r.message_id));
    const rest = new Set((await client.query('SELECT message_id FROM queue.peek($1, 100)', [QUEUE])).rows
      .map((r) => r.message_id));
    // Every message of the interrupted batch was either done or handed back.
    assert.ok(inHand.length > 0 && inHand.every((id) => done.has(id) || rest.has(id)));
    assert.ok(rest.size > 0, 'the loop exited before draining the queue');

    await run(client, { drain: true });        // "restart" the consumer; stop when empty
    process.off('SIGINT', onSigint);

    const doneNs = (await client.query('SELECT n FROM node_done ORDER BY n')).rows.map((r) => r.n);
    assert.deepEqual(doneNs, [1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12]);   // int4: numbers
    const left = (await client.query('SELECT count(*) FROM queue.peek($1, 100)', [QUEUE])).rows[0].count;
    assert.equal(left, '0');                   // count(*) is bigint: a string
    const dead = (await client.query('SELECT body, receive_count FROM queue.peek($1, 100)', [DLQ])).rows;
    assert.equal(dead.length, 1);
    assert.equal(JSON.parse(dead[0].body).n, 4);
    assert.equal(dead[0].receive_count, MAX_RECEIVE_COUNT);
    console.log(`consumer: ${doneNs.length} jobs done once each, job 4 dead-lettered after ${dead[0].receive_count} receives`);
  } finally {
    await client.end();
  }
}

main().catch((err) => {
  console.error('consumer.js: FAILED:', err);
  process.exit(1);
});
