package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"transit/internal/metering"
)

// The SQS case counts a worker's SQS traffic: its start-up lookups and
// other services' requests are left out.
func TestSQSRequests_leaves_out_lookups_and_other_services(t *testing.T) {
	r := metering.Report{Requests: map[string]int64{
		"SQS.ReceiveMessage": 40, "SQS.DeleteMessageBatch": 41, "SQS.GetQueueUrl": 1,
		"SQS.GetQueueAttributes": 1, "SNS.Publish": 400, "STS.GetCallerIdentity": 1,
	}}
	assert.Equal(t, map[string]float64{"SQS.ReceiveMessage": 40, "SQS.DeleteMessageBatch": 41}, sqsRequests(r))
}
