#!/usr/bin/env python3
"""Send commands to transit's sandbox broker from Python (boto3) and wait for their events.

Against a running stack (`make run`, or `transit provision` and `transit serve`):

  1. creates its own SQS queue, subscribed to <prefix>-sandbox-events with raw
     delivery and an SNS filter policy on the `type` attribute, and lets that
     topic send to it;
  2. wire form (a), the envelope as the body: sandbox.sync with a small
     inventory, then waits for sandbox.synced;
  3. wire form (b), the payload alone as the body with the type and the command
     ID in message attributes: sandbox.allocate, then waits for sandbox.allocated;
  4. publishes sandbox.mark-deletion of that sandbox to the SNS topic
     <prefix>-sandbox-commands, then waits for sandbox.deletion-marked;
  5. deletes its queue and subscription.

It exits 1 with a message when an event does not arrive in time or a command
is rejected.

Settings: AWS_ENDPOINT_URL, AWS_REGION, the usual AWS credentials, and
TRANSIT_PREFIX (default transit); TRANSIT_EXAMPLE_TIMEOUT is how many seconds
to wait for each event (default 30). sandbox.sync is the provider's whole
inventory: sandboxes it does not list become stale, so each run lists fresh ones.

    python3 examples/python/send_commands.py
"""

import json
import os
import sys
import time
import uuid
from datetime import datetime, timezone

import boto3

PREFIX = os.environ.get("TRANSIT_PREFIX", "transit")
# boto3 reads AWS_DEFAULT_REGION but not AWS_REGION.
REGION = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
TIMEOUT = float(os.environ.get("TRANSIT_EXAMPLE_TIMEOUT", "30"))

# The events this example waits for, and the rejections that can come instead.
EVENT_TYPES = [
    "sandbox.synced",
    "sandbox.allocated", "sandbox.allocation-rejected",
    "sandbox.deletion-marked", "sandbox.deletion-rejected",
]

sqs = boto3.client("sqs", region_name=REGION)
sns = boto3.client("sns", region_name=REGION)


class Failed(Exception):
    pass


def now():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def string_attributes(**values):
    return {k: {"DataType": "String", "StringValue": v} for k, v in values.items()}


def topic_arn(queue_arn, name):
    # A stack's topics live in the same partition, region and account as
    # its queues: arn:PARTITION:sqs:REGION:ACCOUNT:NAME.
    _, partition, _, region, account, _ = queue_arn.split(":")
    return f"arn:{partition}:sns:{region}:{account}:{name}"


def subscribe(queue_url, queue_arn, events):
    """Subscribes our queue to the events topic, returning the subscription's ARN."""
    # SNS may send to the queue only on behalf of this topic.
    policy = {
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Service": "sns.amazonaws.com"},
            "Action": "sqs:SendMessage",
            "Resource": queue_arn,
            "Condition": {"ArnEquals": {"aws:SourceArn": events}},
        }],
    }
    sqs.set_queue_attributes(QueueUrl=queue_url, Attributes={"Policy": json.dumps(policy)})
    sub = sns.subscribe(
        TopicArn=events, Protocol="sqs", Endpoint=queue_arn, ReturnSubscriptionArn=True,
        Attributes={
            # The body is the event's envelope itself, not SNS's notification around it.
            "RawMessageDelivery": "true",
            "FilterPolicy": json.dumps({"type": EVENT_TYPES}),
        },
    )
    return sub["SubscriptionArn"]


def wait_for(queue_url, command_id, want):
    """Returns the payload of the event command_id caused, which must be of type want."""
    deadline = time.monotonic() + TIMEOUT
    while (left := deadline - time.monotonic()) > 0:
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10,
                                  WaitTimeSeconds=max(1, min(20, int(left))), MessageAttributeNames=["All"])
        for m in got.get("Messages", []):
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
            event = json.loads(m["Body"])
            # Other producers' commands cause events of the same types.
            if event["causation_id"] != command_id:
                continue
            if event["type"] != want:
                raise Failed(f"{command_id}: got {event['type']} {json.dumps(event['payload'])}, want {want}")
            print(f"  <- {event['type']} {json.dumps(event['payload'])}")
            return event
    raise Failed(f"no {want} for command {command_id} within {TIMEOUT:g}s: is `transit serve` running "
                 f"with TRANSIT_PREFIX={PREFIX}? (`transit dlq list` shows commands it refused)")


def check_correlation(event, want):
    if event["correlation_id"] != want:
        raise Failed(f"{event['type']} has correlation_id {event['correlation_id']}, want {want}")


def main():
    try:
        commands = sqs.get_queue_url(QueueName=f"{PREFIX}-sandbox-commands")["QueueUrl"]
    except sqs.exceptions.QueueDoesNotExist:
        raise Failed(f"no queue {PREFIX}-sandbox-commands: is the stack provisioned with TRANSIT_PREFIX={PREFIX}?")
    run = uuid.uuid4().hex[:8]
    queue_url = sqs.create_queue(QueueName=f"{PREFIX}-example-py-{run}")["QueueUrl"]
    subscription = None
    try:
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        subscription = subscribe(queue_url, queue_arn, topic_arn(queue_arn, f"{PREFIX}-sandbox-events"))
        # One correlation ID for the whole conversation; every command has its own ID.
        correlation = str(uuid.uuid4())
        track = f"track-py-{run}"

        # (a) The envelope as the body.
        sync_id = str(uuid.uuid4())
        print(f"-> sandbox.sync {sync_id} (envelope in the body)")
        sqs.send_message(QueueUrl=commands, MessageBody=json.dumps({
            "id": sync_id,
            "type": "sandbox.sync",
            "correlation_id": correlation,
            "occurred_at": now(),
            "schema": 1,
            "payload": {"inventory": [
                {"external_id": f"py-{run}-1", "name": f"python lab {run} 1", "lab_duration_hours": 1},
                {"external_id": f"py-{run}-2", "name": f"python lab {run} 2", "lab_duration_hours": 1},
            ]},
        }))
        synced = wait_for(queue_url, sync_id, "sandbox.synced")
        check_correlation(synced, correlation)

        # (b) The payload alone; the type, the command ID and the correlation
        # ID travel as message attributes.
        allocate_id = str(uuid.uuid4())
        print(f"-> sandbox.allocate {allocate_id} (payload in the body, type in an attribute)")
        sqs.send_message(
            QueueUrl=commands,
            MessageBody=json.dumps({"track_id": track}),
            MessageAttributes=string_attributes(type="sandbox.allocate", id=allocate_id, correlation_id=correlation),
        )
        allocated = wait_for(queue_url, allocate_id, "sandbox.allocated")
        check_correlation(allocated, correlation)

        # Through SNS: a publish to the commands topic reaches the same queue.
        release_id = str(uuid.uuid4())
        print(f"-> sandbox.mark-deletion {release_id} (published to the commands topic)")
        sns.publish(
            TopicArn=topic_arn(queue_arn, f"{PREFIX}-sandbox-commands"),
            Message=json.dumps({
                "id": release_id,
                "type": "sandbox.mark-deletion",
                "correlation_id": correlation,
                "occurred_at": now(),
                "schema": 1,
                "payload": {"sandbox_id": allocated["payload"]["sandbox_id"], "track_id": track},
            }),
            MessageAttributes=string_attributes(type="sandbox.mark-deletion"),
        )
        marked = wait_for(queue_url, release_id, "sandbox.deletion-marked")
        check_correlation(marked, correlation)
        print("ok")
    finally:
        if subscription:
            sns.unsubscribe(SubscriptionArn=subscription)
        sqs.delete_queue(QueueUrl=queue_url)


if __name__ == "__main__":
    try:
        main()
    except Failed as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
