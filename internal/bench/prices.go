package bench

import "strings"

// On-demand list prices in USD, us-east-1, as published for 2026. The
// only place prices live; the report says which ones it used.
const (
	// SQS standard queues: every API action is a request (per 64 KiB chunk).
	sqsPerMillionRequests = 0.40
	// SNS standard topics: publishes; delivery to SQS costs nothing extra.
	snsPerMillionPublishes = 0.50
	// DynamoDB on-demand: per million write and read request units.
	dynamoPerMillionWriteUnits = 0.625
	dynamoPerMillionReadUnits  = 0.125
)

// perCommand is what one command costs on AWS, on average.
type perCommand struct {
	Requests   map[string]float64 `json:"requests"`
	ReadUnits  float64            `json:"read_units"`
	WriteUnits float64            `json:"write_units"`
	// Units splits them by "read|write <table>[/<index>]".
	Units map[string]float64 `json:"units"`
}

// billPerMillion estimates the AWS bill for a million commands.
func (p perCommand) billPerMillion() float64 {
	usd := p.WriteUnits*dynamoPerMillionWriteUnits + p.ReadUnits*dynamoPerMillionReadUnits
	for op, n := range p.Requests {
		switch {
		case strings.HasPrefix(op, "SQS."):
			usd += n * sqsPerMillionRequests
		case op == "SNS.Publish":
			usd += n * snsPerMillionPublishes
		}
	}
	return usd
}

// byService sums requests per AWS service.
func (p perCommand) byService() map[string]float64 {
	out := map[string]float64{}
	for op, n := range p.Requests {
		svc, _, _ := strings.Cut(op, ".")
		out[svc] += n
	}
	return out
}
