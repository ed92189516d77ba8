// examples/sqs/node/producer_consumer.mjs: the AWS SDK for JavaScript v3
// (@aws-sdk/client-sqs, AWS JSON 1.0 protocol) against the queue
// extension's SQS endpoint.
//
// The same three things as ../python_boto3.py, each checked:
//   fifo         two message groups sent in order plus one duplicate (same
//                deduplication id): each group received in order, once
//   dead-letter  RedrivePolicy maxReceiveCount 2: a message received twice
//                and never deleted moves to the dead-letter queue
//   long poll    ReceiveMessage WaitTimeSeconds=5 answered by a send from a
//                second client before the deadline
//
// Environment: SQS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_DEFAULT_REGION.  Queues are named node<pid>-... and deleted at the
// end.  Prints "fifo ok", "dead-letter ok", "long poll ok (...)"; exits 1
// on the first mismatch.  npm ci here first (test/setup.sh does it).
import {
  SQSClient,
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  SendMessageCommand,
  ReceiveMessageCommand,
  DeleteMessageCommand,
  DeleteMessageBatchCommand,
  ListDeadLetterSourceQueuesCommand,
} from "@aws-sdk/client-sqs";

const endpoint = process.env.SQS_ENDPOINT_URL ?? "http://127.0.0.1:9324";
const region = process.env.AWS_DEFAULT_REGION ?? "us-east-1";
const prefix = `node${process.pid}-`;
const client = () => new SQSClient({ endpoint, region });
const sqs = client();

function check(cond, what) {
  if (!cond) {
    console.log(`FAILED: ${what}`);
    process.exit(1);
  }
}

async function fifo() {
  const { QueueUrl: url } = await sqs.send(
    new CreateQueueCommand({ QueueName: `${prefix}orders.fifo`, Attributes: { FifoQueue: "true" } }),
  );
  const sent = { g1: ["g1-a", "g1-b", "g1-c"], g2: ["g2-a", "g2-b"] };
  for (let i = 0; i < 3; i++) {
    for (const [group, bodies] of Object.entries(sent)) {
      if (i >= bodies.length) continue;
      const r = await sqs.send(
        new SendMessageCommand({
          QueueUrl: url,
          MessageBody: bodies[i],
          MessageGroupId: group,
          MessageDeduplicationId: bodies[i],
        }),
      );
      check(r.SequenceNumber, "FIFO send returns a SequenceNumber");
    }
  }
  const again = await sqs.send(
    new SendMessageCommand({ QueueUrl: url, MessageBody: "g1-a", MessageGroupId: "g1", MessageDeduplicationId: "g1-a" }),
  );
  check(again.MessageId, "a duplicate send is accepted");

  const got = { g1: [], g2: [] };
  for (let n = 0, round = 0; n < 5 && round < 20; round++) {
    const r = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageSystemAttributeNames: ["MessageGroupId"],
      }),
    );
    const msgs = r.Messages ?? [];
    for (const m of msgs) got[m.Attributes.MessageGroupId].push(m.Body);
    n += msgs.length;
    if (msgs.length) {
      const d = await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: url,
          Entries: msgs.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
        }),
      );
      check((d.Failed ?? []).length === 0, `batch delete failures: ${JSON.stringify(d.Failed)}`);
    }
  }
  const left = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
  check(!(left.Messages ?? []).length, `queue empty after the groups: ${JSON.stringify(left.Messages)}`);
  check(JSON.stringify(got) === JSON.stringify(sent), `each group in order, each message once: ${JSON.stringify(got)}`);
  await sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
  console.log("fifo ok");
}

async function deadLetter() {
  const { QueueUrl: dlq } = await sqs.send(new CreateQueueCommand({ QueueName: `${prefix}dead` }));
  const arn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlq, AttributeNames: ["QueueArn"] })))
    .Attributes.QueueArn;
  check(arn.startsWith("arn:aws:sqs:") && arn.endsWith(`:${prefix}dead`), `QueueArn ${arn}`);
  const { QueueUrl: work } = await sqs.send(
    new CreateQueueCommand({
      QueueName: `${prefix}work`,
      Attributes: { RedrivePolicy: JSON.stringify({ deadLetterTargetArn: arn, maxReceiveCount: "2" }) },
    }),
  );
  await sqs.send(new SendMessageCommand({ QueueUrl: work, MessageBody: "poison" }));
  let receives = 0;
  let moved = null;
  const deadline = Date.now() + 30000;
  while (!moved && Date.now() < deadline) {
    const r = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: work,
        VisibilityTimeout: 1,
        WaitTimeSeconds: 2,
        MessageSystemAttributeNames: ["ApproximateReceiveCount"],
      }),
    );
    for (const m of r.Messages ?? []) {
      check(m.Body === "poison", `body ${m.Body}`);
      receives++;
      check(Number(m.Attributes.ApproximateReceiveCount) === receives, `ApproximateReceiveCount ${JSON.stringify(m.Attributes)}`);
    }
    const d = await sqs.send(new ReceiveMessageCommand({ QueueUrl: dlq, WaitTimeSeconds: 0 }));
    if ((d.Messages ?? []).length) moved = d.Messages[0];
  }
  check(moved, "the message reached the dead-letter queue");
  check(moved.Body === "poison", `dead-letter body ${moved.Body}`);
  check(receives === 2, `received ${receives} times before it moved (maxReceiveCount 2)`);
  const sources = (await sqs.send(new ListDeadLetterSourceQueuesCommand({ QueueUrl: dlq }))).queueUrls ?? [];
  check(sources.some((u) => u.endsWith(`/${prefix}work`)), `ListDeadLetterSourceQueues ${JSON.stringify(sources)}`);
  await sqs.send(new DeleteMessageCommand({ QueueUrl: dlq, ReceiptHandle: moved.ReceiptHandle }));
  await sqs.send(new DeleteQueueCommand({ QueueUrl: work }));
  await sqs.send(new DeleteQueueCommand({ QueueUrl: dlq }));
  console.log("dead-letter ok");
}

async function longPoll() {
  const { QueueUrl: url } = await sqs.send(new CreateQueueCommand({ QueueName: `${prefix}poll` }));
  const other = client();
  const start = Date.now();
  const sender = new Promise((resolve, reject) =>
    setTimeout(() => other.send(new SendMessageCommand({ QueueUrl: url, MessageBody: "wake up" })).then(resolve, reject), 1000),
  );
  const r = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 5 }));
  const elapsed = (Date.now() - start) / 1000;
  await sender;
  const msgs = r.Messages ?? [];
  check(msgs.length === 1 && msgs[0].Body === "wake up", `long poll got ${JSON.stringify(msgs)}`);
  check(elapsed >= 0.9 && elapsed < 4, `long poll returned after ${elapsed} s (send at 1 s, deadline 5 s)`);
  await sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: msgs[0].ReceiptHandle }));
  await sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
  other.destroy();
  console.log(`long poll ok (returned after ${elapsed.toFixed(1)} s of 5)`);
}

try {
  await fifo();
  await deadLetter();
  await longPoll();
  sqs.destroy();
} catch (e) {
  console.log(`FAILED: ${e.name}: ${e.message}`);
  process.exit(1);
}
