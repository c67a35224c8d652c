package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/assert"
)

// lambdaAnswer is the error chain the SDK returns for a Lambda call
// answered with status and, when code is set, an API error code; the
// deleter wraps it as provider.Lambda does.
func lambdaAnswer(status int, code string) error {
	var inner error = &smithy.DeserializationError{Err: errors.New("not JSON")}
	if code != "" {
		inner = &smithy.GenericAPIError{Code: code, Message: "answer"}
	}
	resp := &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: inner}}
	return fmt.Errorf("delete layer version arn:…: %w",
		&smithy.OperationError{ServiceID: "Lambda", OperationName: "DeleteLayerVersion", Err: resp})
}

func TestLambdaRefused_permanent_4xx_only(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		refused bool
	}{
		{"access denied", lambdaAnswer(403, "AccessDeniedException"), true},
		{"invalid parameter", lambdaAnswer(400, "InvalidParameterValueException"), true},
		{"4xx without a code (an emulator's HTML answer)", lambdaAnswer(403, ""), true},
		{"throttled", lambdaAnswer(429, "TooManyRequestsException"), false},
		{"throttled, code only", lambdaAnswer(400, "ThrottlingException"), false},
		{"operation in progress", lambdaAnswer(409, "ResourceConflictException"), false},
		{"expired credentials", lambdaAnswer(403, "ExpiredTokenException"), false},
		{"request timeout", lambdaAnswer(408, ""), false},
		{"service error", lambdaAnswer(500, "ServiceException"), false},
		{"unavailable", lambdaAnswer(503, ""), false},
		{"network", fmt.Errorf("delete layer version: %w", &smithy.OperationError{Err: errors.New("dial tcp: connection refused")}), false},
		{"deadline", context.DeadlineExceeded, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.refused, lambdaRefused(tc.err))
		})
	}
}
