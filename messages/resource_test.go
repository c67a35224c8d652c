package messages

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseResourceARN_accepts_each_kind(t *testing.T) {
	tests := map[string]ResourceARN{
		"arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0": {
			Type: ResourceEC2Instance, Partition: "aws", Region: "us-east-1", AccountID: "123456789012", ID: "i-0123456789abcdef0"},
		"arn:aws:ec2:eu-central-1:111122223333:instance/i-1a2b3c4d": {
			Type: ResourceEC2Instance, Partition: "aws", Region: "eu-central-1", AccountID: "111122223333", ID: "i-1a2b3c4d"},
		"arn:aws-us-gov:ec2:us-gov-west-1:123456789012:instance/i-0123456789abcdef0": {
			Type: ResourceEC2Instance, Partition: "aws-us-gov", Region: "us-gov-west-1", AccountID: "123456789012", ID: "i-0123456789abcdef0"},
		"arn:aws:rds:us-east-1:123456789012:db:orders-db-1": {
			Type: ResourceRDSInstance, Partition: "aws", Region: "us-east-1", AccountID: "123456789012", ID: "orders-db-1"},
		"arn:aws-cn:rds:cn-north-1:123456789012:db:a": {
			Type: ResourceRDSInstance, Partition: "aws-cn", Region: "cn-north-1", AccountID: "123456789012", ID: "a"},
		"arn:aws:rds:us-east-1:123456789012:db:d" + strings.Repeat("b", 62): {
			Type: ResourceRDSInstance, Partition: "aws", Region: "us-east-1", AccountID: "123456789012", ID: "d" + strings.Repeat("b", 62)},
		"arn:aws:ecs:eu-west-1:123456789012:service/prod_cluster/web-api": {
			Type: ResourceECSService, Partition: "aws", Region: "eu-west-1", AccountID: "123456789012", Cluster: "prod_cluster", ID: "web-api"},
		"arn:aws:ecs:eu-west-1:123456789012:service/web-api": {
			Type: ResourceECSService, Partition: "aws", Region: "eu-west-1", AccountID: "123456789012", Cluster: "default", ID: "web-api"},
		"arn:aws:ecs:us-east-1:123456789012:service/c/" + strings.Repeat("s", 255): {
			Type: ResourceECSService, Partition: "aws", Region: "us-east-1", AccountID: "123456789012", Cluster: "c", ID: strings.Repeat("s", 255)},
	}
	for arn, want := range tests {
		t.Run(arn, func(t *testing.T) {
			got, err := ParseResourceARN(arn)
			require.NoError(t, err)
			want.ARN = arn
			assert.Equal(t, want, got)
		})
	}
}

func TestParseResourceARN_refuses(t *testing.T) {
	const notOurs = "is not an EC2 instance, RDS DB instance or ECS service ARN"
	tests := []struct {
		name, arn, want string
	}{
		{"empty", "", "is not an ARN"},
		{"not an ARN", "i-0123456789abcdef0", "is not an ARN"},
		{"too few parts", "arn:aws:ec2:us-east-1:123456789012", "is not an ARN"},
		{"another service", "arn:aws:s3:::b", notOurs},
		{"lambda", "arn:aws:lambda:us-east-1:123456789012:function:f", notOurs},
		{"unknown partition", "arn:aws-xx:ec2:us-east-1:123456789012:instance/i-1a2b3c4d", `partition "aws-xx"`},

		{"EC2 volume", "arn:aws:ec2:us-east-1:123456789012:volume/vol-0123456789abcdef0", notOurs},
		{"EC2 bare ID", "arn:aws:ec2:us-east-1:123456789012:i-0123456789abcdef0", notOurs},
		{"EC2 empty region", "arn:aws:ec2::123456789012:instance/i-0123456789abcdef0", `region ""`},
		{"EC2 bad region", "arn:aws:ec2:useast1:123456789012:instance/i-0123456789abcdef0", `region "useast1"`},
		{"EC2 empty account", "arn:aws:ec2:us-east-1::instance/i-0123456789abcdef0", `account ""`},
		{"EC2 11-digit account", "arn:aws:ec2:us-east-1:12345678901:instance/i-0123456789abcdef0", `account "12345678901"`},
		{"EC2 13-digit account", "arn:aws:ec2:us-east-1:1234567890123:instance/i-0123456789abcdef0", "is not 12 digits"},
		{"EC2 lettered account", "arn:aws:ec2:us-east-1:12345678901a:instance/i-0123456789abcdef0", "is not 12 digits"},
		{"EC2 ID of 9 hex", "arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789", `instance ID "i-0123456789"`},
		{"EC2 ID not hex", "arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdefg", "instance ID"},
		{"EC2 ID upper case", "arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789ABCDEF0", "instance ID"},
		{"EC2 no ID", "arn:aws:ec2:us-east-1:123456789012:instance/", "instance ID"},
		{"EC2 trailing space", "arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0 ", "no whitespace"},
		{"EC2 hash", "arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0#x", "'#'"},

		{"RDS cluster", "arn:aws:rds:us-east-1:123456789012:cluster:orders", notOurs},
		{"RDS snapshot", "arn:aws:rds:us-east-1:123456789012:snapshot:s1", notOurs},
		{"RDS empty identifier", "arn:aws:rds:us-east-1:123456789012:db:", "DB instance identifier"},
		{"RDS digit first", "arn:aws:rds:us-east-1:123456789012:db:1orders", "DB instance identifier"},
		{"RDS trailing hyphen", "arn:aws:rds:us-east-1:123456789012:db:orders-", "DB instance identifier"},
		{"RDS double hyphen", "arn:aws:rds:us-east-1:123456789012:db:orders--db", "DB instance identifier"},
		{"RDS underscore", "arn:aws:rds:us-east-1:123456789012:db:orders_db", "DB instance identifier"},
		{"RDS 64 characters", "arn:aws:rds:us-east-1:123456789012:db:d" + strings.Repeat("b", 63), "DB instance identifier"},
		{"RDS colon", "arn:aws:rds:us-east-1:123456789012:db:orders:x", "DB instance identifier"},
		{"RDS hash", "arn:aws:rds:us-east-1:123456789012:db:orders#1", "'#'"},
		{"RDS tab", "arn:aws:rds:us-east-1:123456789012:db:or\tders", "no whitespace"},

		{"ECS cluster", "arn:aws:ecs:us-east-1:123456789012:cluster/prod", notOurs},
		{"ECS task", "arn:aws:ecs:us-east-1:123456789012:task/prod/0123456789abcdef", notOurs},
		{"ECS no name", "arn:aws:ecs:us-east-1:123456789012:service/", "ECS cluster or service name"},
		{"ECS empty cluster", "arn:aws:ecs:us-east-1:123456789012:service//web", "ECS cluster or service name"},
		{"ECS empty service", "arn:aws:ecs:us-east-1:123456789012:service/prod/", "ECS cluster or service name"},
		{"ECS three parts", "arn:aws:ecs:us-east-1:123456789012:service/a/b/c", "want service/CLUSTER/NAME or service/NAME"},
		{"ECS dot", "arn:aws:ecs:us-east-1:123456789012:service/prod/web.api", "ECS cluster or service name"},
		{"ECS 256 characters", "arn:aws:ecs:us-east-1:123456789012:service/prod/" + strings.Repeat("s", 256), "ECS cluster or service name"},
		{"ECS hash", "arn:aws:ecs:us-east-1:123456789012:service/prod#1/web", "'#'"},
		{"ECS newline", "arn:aws:ecs:us-east-1:123456789012:service/prod/web\n", "no whitespace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseResourceARN(tc.arn)
			require.Error(t, err)
			assert.Zero(t, got)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	_, err := ParseResourceARN("arn:aws:s3:::b")
	assert.EqualError(t, err, `"arn:aws:s3:::b" is not an EC2 instance, RDS DB instance or ECS service ARN`)
}

func TestParseRoleARN_ResourceAccounts(t *testing.T) {
	valid := map[string]string{
		"arn:aws:iam::123456789012:role/transit-nucleus":                          "123456789012",
		"arn:aws:iam::111122223333:role/service-role/ops/Scheduler+=,.@_-":        "111122223333",
		"arn:aws-cn:iam::123456789012:role/r":                                     "123456789012",
		"arn:aws-us-gov:iam::123456789012:role/" + strings.Repeat("r", 64):        "123456789012",
		"arn:aws:iam::123456789012:role/" + strings.Repeat("p/", 900) + "nucleus": "123456789012",
	}
	for arn, account := range valid {
		t.Run("valid "+arn[:min(len(arn), 60)], func(t *testing.T) {
			got, err := ParseRoleARN(arn)
			require.NoError(t, err)
			assert.Equal(t, account, got)
		})
	}

	invalid := map[string]string{
		"empty":            "",
		"user":             "arn:aws:iam::123456789012:user/ada",
		"no name":          "arn:aws:iam::123456789012:role/",
		"trailing slash":   "arn:aws:iam::123456789012:role/ops/",
		"11-digit account": "arn:aws:iam::12345678901:role/r",
		"empty account":    "arn:aws:iam:::role/r",
		"a region":         "arn:aws:iam:us-east-1:123456789012:role/r",
		"not iam":          "arn:aws:sts::123456789012:assumed-role/r/s",
		"bad partition":    "arn:aws-xx:iam::123456789012:role/r",
		"name of 65":       "arn:aws:iam::123456789012:role/" + strings.Repeat("r", 65),
		"colon in name":    "arn:aws:iam::123456789012:role/a:b",
		"space":            "arn:aws:iam::123456789012:role/a b",
		"hash":             "arn:aws:iam::123456789012:role/a#b",
		"too long":         "arn:aws:iam::123456789012:role/" + strings.Repeat("p/", 1100) + "r",
	}
	for name, arn := range invalid {
		t.Run(name, func(t *testing.T) {
			got, err := ParseRoleARN(arn)
			require.Error(t, err)
			assert.Empty(t, got)
		})
	}
}
