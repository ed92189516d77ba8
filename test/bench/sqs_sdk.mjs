// One sequential AWS SDK for JavaScript v3 client's full cycle against the
// SQS endpoint, for test/bench/sqs_sdk.sh (AWS JSON 1.0): as sqs_sdk.py.
// The SDK is examples/sqs/node's (npm ci there first).
//
//   node sqs_sdk.mjs <endpoint> <key> <secret> <queue> <batch> <secs>
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../../examples/sqs/node/package.json"));
const {
  SQSClient, GetQueueUrlCommand, SendMessageCommand, SendMessageBatchCommand,
  ReceiveMessageCommand, DeleteMessageCommand, DeleteMessageBatchCommand,
} = require("@aws-sdk/client-sqs");

const [endpoint, key, secret, queue, batchArg, secsArg] = process.argv.slice(2);
const batch = Number(batchArg);
const secs = Number(secsArg);
const sqs = new SQSClient({
  endpoint, region: "us-east-1", maxAttempts: 1,
  credentials: { accessKeyId: key, secretAccessKey: secret },
});
const { QueueUrl } = await sqs.send(new GetQueueUrlCommand({ QueueName: queue }));
const body = "x".repeat(100);
let done = 0, requests = 0;
const t0 = performance.now();
while (performance.now() - t0 < secs * 1000) {
  if (batch === 1) await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: body }));
  else
    await sqs.send(new SendMessageBatchCommand({
      QueueUrl, Entries: Array.from({ length: batch }, (_, i) => ({ Id: String(i), MessageBody: body })),
    }));
  const r = await sqs.send(new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: batch }));
  const msgs = r.Messages ?? [];
  if (batch === 1) {
    for (const m of msgs) await sqs.send(new DeleteMessageCommand({ QueueUrl, ReceiptHandle: m.ReceiptHandle }));
  } else if (msgs.length) {
    const d = await sqs.send(new DeleteMessageBatchCommand({
      QueueUrl, Entries: msgs.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
    }));
    if (d.Failed?.length) throw new Error(`delete failed: ${JSON.stringify(d.Failed)}`);
  }
  requests += 3;
  done += msgs.length;
}
const el = (performance.now() - t0) / 1000;
console.log(`${(done / el).toFixed(1)} messages/s (${done} deleted in ${el.toFixed(1)} s, ${requests} requests)`);
