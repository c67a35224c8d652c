// Package transport moves transit's messages on SQS and SNS: the stack's
// queues and topics (Stack) and their provisioning, the SQS subscriber
// that keeps Watermill's Subscriber contract, the publisher that sends
// each message where its type belongs, batched sends, and the dead-letter
// queues' reading and redrive.
package transport
