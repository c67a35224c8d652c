package provider

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// Lambda deletes Lambda layer versions, in whichever region each lives.
type Lambda struct {
	cfg     aws.Config
	mu      sync.Mutex
	clients map[string]*lambda.Client
}

// NewLambda returns a layer deleter using cfg (its region is replaced by
// each layer's).
func NewLambda(cfg aws.Config) *Lambda {
	return &Lambda{cfg: cfg, clients: map[string]*lambda.Client{}}
}

// DeleteLayerVersion deletes the layer version an ARN names
// (arn:aws:lambda:REGION:ACCOUNT:layer:NAME:VERSION). A version already
// gone counts as deleted, so a repeated removal succeeds.
func (l *Lambda) DeleteLayerVersion(ctx context.Context, arn string) error {
	region, layer, version, err := parseLayerARN(arn)
	if err != nil {
		return err
	}
	_, err = l.client(region).DeleteLayerVersion(ctx, &lambda.DeleteLayerVersionInput{
		LayerName:     aws.String(layer),
		VersionNumber: aws.Int64(version),
	})
	var missing *types.ResourceNotFoundException
	if err != nil && !errors.As(err, &missing) {
		return fmt.Errorf("delete layer version %s: %w", arn, err)
	}
	return nil
}

func (l *Lambda) client(region string) *lambda.Client {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.clients[region]
	if !ok {
		c = lambda.NewFromConfig(l.cfg, func(o *lambda.Options) { o.Region = region })
		l.clients[region] = c
	}
	return c
}

// parseLayerARN splits a layer version ARN into region, layer name and
// version. The name, not the layer's ARN: moto looks layers up by name.
func parseLayerARN(arn string) (region, layer string, version int64, err error) {
	parts := strings.Split(arn, ":")
	if len(parts) != 8 || parts[2] != "lambda" || parts[5] != "layer" {
		return "", "", 0, fmt.Errorf("%q is not a layer version ARN", arn)
	}
	version, err = strconv.ParseInt(parts[7], 10, 64)
	if err != nil {
		return "", "", 0, fmt.Errorf("%q is not a layer version ARN: %w", arn, err)
	}
	return parts[3], parts[6], version, nil
}
