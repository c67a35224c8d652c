// Package store holds transit's DynamoDB side: the table definitions that
// provisioning reads, and each domain's transitions as conditional writes
// or transactions that also record the command's outcome.
package store

import (
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
)

// Store runs transitions against one stack's tables.
type Store struct {
	db             *dynamodb.Client
	sandboxes      string
	audit          string
	auditRetention time.Duration
}

// New returns a Store for the stack named by prefix. Audit items expire
// auditRetention after their command.
func New(db *dynamodb.Client, prefix string, auditRetention time.Duration) *Store {
	if db == nil {
		panic("store: nil DynamoDB client")
	}
	return &Store{
		db:             db,
		sandboxes:      TableName(prefix, SandboxPool),
		audit:          TableName(prefix, Audit),
		auditRetention: auditRetention,
	}
}

// IsPermanent reports whether a DynamoDB error can never succeed on retry:
// the request itself is invalid. Throttling, timeouts and 5xx are not.
func IsPermanent(err error) bool {
	if errors.Is(err, ErrIDReused) || errors.Is(err, ErrSyncTooLarge) {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "ValidationException", "SerializationException":
			return true
		}
	}
	return false
}
