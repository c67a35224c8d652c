package store

import "github.com/aws/aws-sdk-go-v2/service/dynamodb"

// CreateTableInput is the CreateTable request Provision sends for t under
// name, billed as c says. The CloudFormation template (service.CloudFormation) is built from
// it, so the template and provisioning cannot drift apart.
func CreateTableInput(name string, t Table, c Capacity) *dynamodb.CreateTableInput {
	return createTableInput(name, t, c)
}
