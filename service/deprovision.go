package service

import (
	"context"
	"errors"

	"transit/store"
	"transit/transport"
)

// Deprovision deletes every table, queue and topic Provision creates, and
// the topics' subscriptions and the tables' auto-scaling, reading the same definitions. Messaging goes
// first so nothing more arrives for the tables; both halves are attempted
// even when one fails. What is already gone is skipped.
func (s *Service) Deprovision(ctx context.Context) error {
	return errors.Join(
		transport.Deprovision(ctx, s.SQS, s.SNS, s.Stack),
		store.Deprovision(ctx, s.DynamoDB, s.AutoScaling, s.Config.Prefix),
	)
}
