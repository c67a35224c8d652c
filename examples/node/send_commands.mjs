// Send commands to transit's sandbox broker from Node.js (AWS SDK for
// JavaScript v3) and wait for their events.
//
// Against a running stack (`make run`, or `transit provision` and `transit serve`):
//
//   1. creates its own SQS queue, subscribed to <prefix>-sandbox-events with
//      raw delivery and an SNS filter policy on the `type` attribute, and
//      lets that topic send to it;
//   2. wire form (a), the envelope as the body: sandbox.sync with a small
//      inventory, then waits for sandbox.synced;
//   3. wire form (b), the payload alone as the body with the type and the
//      command ID in message attributes: sandbox.allocate, then waits for
//      sandbox.allocated;
//   4. publishes sandbox.mark-deletion of that sandbox to the SNS topic
//      <prefix>-sandbox-commands, then waits for sandbox.deletion-marked;
//   5. deletes its queue and subscription.
//
// It exits 1 with a message when an event does not arrive in time or a
// command is rejected.
//
// Settings: AWS_ENDPOINT_URL, AWS_REGION, the usual AWS credentials, and
// TRANSIT_PREFIX (default transit); TRANSIT_EXAMPLE_TIMEOUT is how many
// seconds to wait for each event (default 30). sandbox.sync is the
// provider's whole inventory: sandboxes it does not list become stale, so
// each run lists fresh ones.
//
//     cd examples/node && npm ci && node send_commands.mjs

import { randomUUID } from "node:crypto";
import {
  SQSClient, CreateQueueCommand, DeleteQueueCommand, DeleteMessageCommand, GetQueueAttributesCommand,
  GetQueueUrlCommand, QueueDoesNotExist, ReceiveMessageCommand, SendMessageCommand, SetQueueAttributesCommand,
} from "@aws-sdk/client-sqs";
import {
  SNSClient, PublishCommand, SubscribeCommand, UnsubscribeCommand,
} from "@aws-sdk/client-sns";

const PREFIX = process.env.TRANSIT_PREFIX || "transit";
const TIMEOUT = Number(process.env.TRANSIT_EXAMPLE_TIMEOUT || "30");

// The events this example waits for, and the rejections that can come instead.
const EVENT_TYPES = [
  "sandbox.synced",
  "sandbox.allocated", "sandbox.allocation-rejected",
  "sandbox.deletion-marked", "sandbox.deletion-rejected",
];

// Both clients read AWS_ENDPOINT_URL, AWS_REGION and the credentials themselves.
const sqs = new SQSClient({});
const sns = new SNSClient({});

class Failed extends Error {}

const now = () => new Date().toISOString().replace(/\.\d+Z$/, "Z");

const stringAttributes = (values) =>
  Object.fromEntries(Object.entries(values).map(([k, v]) => [k, { DataType: "String", StringValue: v }]));

// A stack's topics live in the same partition, region and account as its
// queues: arn:PARTITION:sqs:REGION:ACCOUNT:NAME.
function topicArn(queueArn, name) {
  const [, partition, , region, account] = queueArn.split(":");
  return `arn:${partition}:sns:${region}:${account}:${name}`;
}

// Subscribes our queue to the events topic, returning the subscription's ARN.
async function subscribe(queueUrl, queueArn, events) {
  // SNS may send to the queue only on behalf of this topic.
  const policy = {
    Version: "2012-10-17",
    Statement: [{
      Effect: "Allow",
      Principal: { Service: "sns.amazonaws.com" },
      Action: "sqs:SendMessage",
      Resource: queueArn,
      Condition: { ArnEquals: { "aws:SourceArn": events } },
    }],
  };
  await sqs.send(new SetQueueAttributesCommand({ QueueUrl: queueUrl, Attributes: { Policy: JSON.stringify(policy) } }));
  const sub = await sns.send(new SubscribeCommand({
    TopicArn: events, Protocol: "sqs", Endpoint: queueArn, ReturnSubscriptionArn: true,
    Attributes: {
      // The body is the event's envelope itself, not SNS's notification around it.
      RawMessageDelivery: "true",
      FilterPolicy: JSON.stringify({ type: EVENT_TYPES }),
    },
  }));
  return sub.SubscriptionArn;
}

// Returns the event commandId caused, which must be of type want.
async function waitFor(queueUrl, commandId, want) {
  const deadline = Date.now() + TIMEOUT * 1000;
  let left;
  while ((left = (deadline - Date.now()) / 1000) > 0) {
    const got = await sqs.send(new ReceiveMessageCommand({
      QueueUrl: queueUrl, MaxNumberOfMessages: 10,
      WaitTimeSeconds: Math.max(1, Math.min(20, Math.floor(left))), MessageAttributeNames: ["All"],
    }));
    for (const m of got.Messages ?? []) {
      await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: m.ReceiptHandle }));
      const event = JSON.parse(m.Body);
      // Other producers' commands cause events of the same types.
      if (event.causation_id !== commandId) continue;
      if (event.type !== want) {
        throw new Failed(`${commandId}: got ${event.type} ${JSON.stringify(event.payload)}, want ${want}`);
      }
      console.log(`  <- ${event.type} ${JSON.stringify(event.payload)}`);
      return event;
    }
  }
  throw new Failed(`no ${want} for command ${commandId} within ${TIMEOUT}s: is \`transit serve\` running ` +
    `with TRANSIT_PREFIX=${PREFIX}? (\`transit dlq list\` shows commands it refused)`);
}

function checkCorrelation(event, want) {
  if (event.correlation_id !== want) {
    throw new Failed(`${event.type} has correlation_id ${event.correlation_id}, want ${want}`);
  }
}

async function main() {
  let commands;
  try {
    commands = (await sqs.send(new GetQueueUrlCommand({ QueueName: `${PREFIX}-sandbox-commands` }))).QueueUrl;
  } catch (err) {
    if (!(err instanceof QueueDoesNotExist)) throw err;
    throw new Failed(`no queue ${PREFIX}-sandbox-commands: is the stack provisioned with TRANSIT_PREFIX=${PREFIX}?`);
  }
  const run = randomUUID().slice(0, 8);
  const queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: `${PREFIX}-example-node-${run}` }))).QueueUrl;
  let subscription;
  try {
    const queueArn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["QueueArn"] })))
      .Attributes.QueueArn;
    subscription = await subscribe(queueUrl, queueArn, topicArn(queueArn, `${PREFIX}-sandbox-events`));
    // One correlation ID for the whole conversation; every command has its own ID.
    const correlation = randomUUID();
    const track = `track-node-${run}`;

    // (a) The envelope as the body.
    const syncId = randomUUID();
    console.log(`-> sandbox.sync ${syncId} (envelope in the body)`);
    await sqs.send(new SendMessageCommand({
      QueueUrl: commands,
      MessageBody: JSON.stringify({
        id: syncId,
        type: "sandbox.sync",
        correlation_id: correlation,
        occurred_at: now(),
        schema: 1,
        payload: {
          inventory: [
            { external_id: `node-${run}-1`, name: `node lab ${run} 1`, lab_duration_hours: 1 },
            { external_id: `node-${run}-2`, name: `node lab ${run} 2`, lab_duration_hours: 1 },
          ],
        },
      }),
    }));
    checkCorrelation(await waitFor(queueUrl, syncId, "sandbox.synced"), correlation);

    // (b) The payload alone; the type, the command ID and the correlation
    // ID travel as message attributes.
    const allocateId = randomUUID();
    console.log(`-> sandbox.allocate ${allocateId} (payload in the body, type in an attribute)`);
    await sqs.send(new SendMessageCommand({
      QueueUrl: commands,
      MessageBody: JSON.stringify({ track_id: track }),
      MessageAttributes: stringAttributes({ type: "sandbox.allocate", id: allocateId, correlation_id: correlation }),
    }));
    const allocated = await waitFor(queueUrl, allocateId, "sandbox.allocated");
    checkCorrelation(allocated, correlation);

    // Through SNS: a publish to the commands topic reaches the same queue.
    const releaseId = randomUUID();
    console.log(`-> sandbox.mark-deletion ${releaseId} (published to the commands topic)`);
    await sns.send(new PublishCommand({
      TopicArn: topicArn(queueArn, `${PREFIX}-sandbox-commands`),
      Message: JSON.stringify({
        id: releaseId,
        type: "sandbox.mark-deletion",
        correlation_id: correlation,
        occurred_at: now(),
        schema: 1,
        payload: { sandbox_id: allocated.payload.sandbox_id, track_id: track },
      }),
      MessageAttributes: stringAttributes({ type: "sandbox.mark-deletion" }),
    }));
    checkCorrelation(await waitFor(queueUrl, releaseId, "sandbox.deletion-marked"), correlation);
    console.log("ok");
  } finally {
    if (subscription) await sns.send(new UnsubscribeCommand({ SubscriptionArn: subscription }));
    await sqs.send(new DeleteQueueCommand({ QueueUrl: queueUrl }));
  }
}

try {
  await main();
} catch (err) {
  if (!(err instanceof Failed)) throw err;
  console.error(`error: ${err.message}`);
  process.exit(1);
}
