package messages

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Resource types a schedule can target.
const (
	ResourceEC2Instance = "ec2_instance"
	ResourceRDSInstance = "rds_instance"
	ResourceECSService  = "ecs_service"
)

// ResourceARN is a targeted resource's ARN, parsed.
type ResourceARN struct {
	ARN, Type, Partition, Region, AccountID string
	// ID is the instance ID (i-…), the DB instance identifier, or the ECS service name.
	ID string
	// Cluster is an ECS service's cluster ("default" for the old ARN form without one).
	Cluster string
}

var (
	partitions        = []string{"aws", "aws-cn", "aws-us-gov"}
	instanceIDPattern = regexp.MustCompile(`^i-(?:[0-9a-f]{8}|[0-9a-f]{17})$`)
	// A letter first, and no hyphen at the end or after another.
	dbIdentifierPattern = regexp.MustCompile(`^[A-Za-z](?:-?[A-Za-z0-9])*$`)
	ecsNamePattern      = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
	roleARNPattern      = regexp.MustCompile(`^arn:(?:aws|aws-cn|aws-us-gov):iam::(\d{12}):role/(?:[\w+=,.@-]+/)*[\w+=,.@-]{1,64}$`)
)

const (
	maxDBIdentifier = 63
	maxRoleARN      = 2048
)

// ParseResourceARN parses the ARN of an EC2 instance
// (arn:aws:ec2:REGION:ACCOUNT:instance/i-…), an RDS DB instance
// (…:rds:REGION:ACCOUNT:db:IDENTIFIER) or an ECS service
// (…:ecs:REGION:ACCOUNT:service/CLUSTER/NAME, or service/NAME in the
// cluster "default"), and refuses anything else. A '#' is refused
// anywhere: transit separates the parts of its keys with it.
func ParseResourceARN(arn string) (ResourceARN, error) {
	if err := checkARNCharacters(arn); err != nil {
		return ResourceARN{}, err
	}
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" {
		return ResourceARN{}, fmt.Errorf("%q is not an ARN (arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE)", arn)
	}
	r := ResourceARN{ARN: arn, Partition: parts[1], Region: parts[3], AccountID: parts[4]}
	service, resource := parts[2], parts[5]
	notOurs := fmt.Errorf("%q is not an EC2 instance, RDS DB instance or ECS service ARN", arn)
	switch {
	case service != "ec2" && service != "rds" && service != "ecs":
		return ResourceARN{}, notOurs
	case !slices.Contains(partitions, r.Partition):
		return ResourceARN{}, fmt.Errorf("%q: partition %q is not aws, aws-cn or aws-us-gov", arn, r.Partition)
	case !regionPattern.MatchString(r.Region):
		return ResourceARN{}, fmt.Errorf("%q: region %q is not an AWS region name", arn, r.Region)
	case len(r.AccountID) != 12 || strings.Trim(r.AccountID, "0123456789") != "":
		return ResourceARN{}, fmt.Errorf("%q: account %q is not 12 digits", arn, r.AccountID)
	}
	switch service {
	case "ec2":
		id, ok := strings.CutPrefix(resource, "instance/")
		if !ok {
			return ResourceARN{}, notOurs
		}
		if !instanceIDPattern.MatchString(id) {
			return ResourceARN{}, fmt.Errorf("%q: instance ID %q is not i- and 8 or 17 lowercase hex digits", arn, id)
		}
		r.Type, r.ID = ResourceEC2Instance, id
	case "rds":
		id, ok := strings.CutPrefix(resource, "db:")
		if !ok {
			return ResourceARN{}, notOurs
		}
		if len(id) > maxDBIdentifier || !dbIdentifierPattern.MatchString(id) {
			return ResourceARN{}, fmt.Errorf("%q: DB instance identifier %q is not 1 to %d letters, digits and hyphens, "+
				"starting with a letter, without a hyphen at the end or two in a row", arn, id, maxDBIdentifier)
		}
		r.Type, r.ID = ResourceRDSInstance, id
	case "ecs":
		path, ok := strings.CutPrefix(resource, "service/")
		if !ok {
			return ResourceARN{}, notOurs
		}
		names := strings.Split(path, "/")
		if len(names) == 1 {
			names = []string{"default", names[0]}
		}
		if len(names) != 2 {
			return ResourceARN{}, fmt.Errorf("%q: want service/CLUSTER/NAME or service/NAME", arn)
		}
		for _, name := range names {
			if !ecsNamePattern.MatchString(name) {
				return ResourceARN{}, fmt.Errorf("%q: %q is not an ECS cluster or service name (1 to 255 letters, digits, - _)", arn, name)
			}
		}
		r.Type, r.Cluster, r.ID = ResourceECSService, names[0], names[1]
	}
	return r, nil
}

// ParseRoleARN checks an IAM role ARN (arn:aws:iam::ACCOUNT:role/PATH/NAME,
// the path optional) and returns its account ID.
func ParseRoleARN(arn string) (accountID string, err error) {
	if err := checkARNCharacters(arn); err != nil {
		return "", err
	}
	if len(arn) > maxRoleARN {
		return "", fmt.Errorf("role ARN of %d characters, want at most %d", len(arn), maxRoleARN)
	}
	m := roleARNPattern.FindStringSubmatch(arn)
	if m == nil {
		return "", fmt.Errorf("%q is not an IAM role ARN (arn:aws:iam::ACCOUNT:role/NAME, the account 12 digits)", arn)
	}
	return m[1], nil
}

// checkARNCharacters refuses what no accepted ARN holds but a pasted one
// may: whitespace, and transit's key separator.
func checkARNCharacters(arn string) error {
	switch {
	case strings.ContainsFunc(arn, unicode.IsSpace):
		return fmt.Errorf("%q: an ARN holds no whitespace", arn)
	case strings.Contains(arn, "#"):
		return fmt.Errorf("%q: an ARN here holds no '#' (transit's key separator)", arn)
	}
	return nil
}
