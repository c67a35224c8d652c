package transport

// DLQRetentionSeconds is the message retention Provision gives every DLQ,
// exported for the CloudFormation template (service.CloudFormation).
const DLQRetentionSeconds = dlqRetentionSeconds
