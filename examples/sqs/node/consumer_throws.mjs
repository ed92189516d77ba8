// examples/sqs/node/consumer_throws.mjs: bbc's sqs-consumer and
// sqs-producer (npm, unchanged) against the queue extension's SQS endpoint,
// with a handler that sometimes throws.
//
//   jobs         sqs-producer sends 30 messages in batches of 10; the
//                handler throws on the first attempt of every third one
//                (sqs-consumer then leaves it to be received again:
//                terminateVisibilityTimeout sets its visibility to 0), so
//                every message is handled, some twice, and deleted
//   poison       one message whose handler always throws: after the queue's
//                RedrivePolicy maxReceiveCount (3) it is in the dead-letter
//                queue, with DeadLetterQueueSourceArn
//
// Environment as producer_consumer.mjs (SQS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION).  Queues are named
// node<pid>-... and deleted at the end.  Prints "sqs-consumer ok (...)" and
// "poison ok"; exits 1 on the first mismatch or on any error event (an
// error of the endpoint, as opposed to the handler's).
import {
  SQSClient,
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
} from "@aws-sdk/client-sqs";
import { Consumer } from "sqs-consumer";
import { Producer } from "sqs-producer";

const endpoint = process.env.SQS_ENDPOINT_URL ?? "http://127.0.0.1:9324";
const region = process.env.AWS_DEFAULT_REGION ?? "us-east-1";
const prefix = `node${process.pid}-`;
const sqs = new SQSClient({ endpoint, region });

function fail(what) {
  console.log(`FAILED: ${what}`);
  process.exit(1);
}

const { QueueUrl: dlqUrl } = await sqs.send(new CreateQueueCommand({ QueueName: `${prefix}jobs-dlq` }));
const { Attributes: dlqAttrs } = await sqs.send(
  new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ["QueueArn"] }),
);
const { QueueUrl: url } = await sqs.send(
  new CreateQueueCommand({
    QueueName: `${prefix}jobs`,
    Attributes: {
      VisibilityTimeout: "5",
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqAttrs.QueueArn, maxReceiveCount: "3" }),
    },
  }),
);

const producer = Producer.create({ queueUrl: url, sqs, batchSize: 10 });
const ids = Array.from({ length: 30 }, (_, i) => `job-${i}`);
await producer.send(ids.map((id) => ({ id, body: id })));
await producer.send([{ id: "poison", body: "poison" }]);

const attempts = new Map();
const handled = new Set();
let thrown = 0;
const errors = [];
const consumer = Consumer.create({
  queueUrl: url,
  sqs,
  batchSize: 10,
  waitTimeSeconds: 1,
  terminateVisibilityTimeout: true,
  attributeNames: ["ApproximateReceiveCount"],
  handleMessage: async (message) => {
    const n = (attempts.get(message.Body) ?? 0) + 1;
    attempts.set(message.Body, n);
    const i = Number(message.Body.replace("job-", ""));
    if (message.Body === "poison" || (i % 3 === 0 && n === 1)) {
      thrown++;
      throw new Error(`handler fails on ${message.Body} (attempt ${n})`);
    }
    handled.add(message.Body);
    return message;
  },
});
consumer.on("error", (err) => errors.push(err.message));
consumer.on("processing_error", () => {});
consumer.start();

const deadline = Date.now() + 60000;
let dead = null;
while (Date.now() < deadline) {
  if (handled.size === ids.length && !dead) {
    const r = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: dlqUrl,
        MessageSystemAttributeNames: ["All"],
        MessageAttributeNames: ["All"],
        VisibilityTimeout: 0,
      }),
    );
    if (r.Messages?.length) dead = r.Messages[0];
  }
  if (handled.size === ids.length && dead) break;
  await new Promise((res) => setTimeout(res, 200));
}
consumer.stop({ abort: true });

if (errors.length) fail(`error events: ${errors.join("; ")}`);
if (handled.size !== ids.length) fail(`handled ${handled.size} of ${ids.length}`);
const retried = ids.filter((id) => attempts.get(id) > 1).length;
if (retried < 10) fail(`only ${retried} messages were received again after the handler threw`);
console.log(`sqs-consumer ok (${ids.length} handled, ${retried} after a throw, ${thrown} throws)`);
if (!dead || dead.Body !== "poison") fail("the poison message is not in the dead-letter queue");
if (!dead.Attributes?.DeadLetterQueueSourceArn?.endsWith(`:${prefix}jobs`))
  fail(`DeadLetterQueueSourceArn: ${JSON.stringify(dead.Attributes)}`);
if (dead.MessageAttributes && Object.keys(dead.MessageAttributes).length)
  fail(`a dead letter with attributes: ${JSON.stringify(dead.MessageAttributes)}`);
console.log("poison ok");

await sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
await sqs.send(new DeleteQueueCommand({ QueueUrl: dlqUrl }));
