// Package tracing sets transit's W3C trace-context tracing up from the
// standard OTEL_* environment, and holds the span conventions the other
// packages share: a consumer span per delivery (Consume), a producer span
// per message sent (StartPublish), the trace context carried in message
// attributes, a client span per AWS call (InstrumentAWS). Tracing is off
// unless OTEL_TRACES_EXPORTER names an exporter; then the provider is the
// no-op one and nothing is instrumented. The provider is always passed
// explicitly, never the process's global one.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of transit's own spans.
const ScopeName = "transit"

// ServiceName is the service.name of transit's spans unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names another.
const ServiceName = "transit"

// The variables that turn tracing on.
const (
	ExporterVariable = "OTEL_TRACES_EXPORTER"
	DisabledVariable = "OTEL_SDK_DISABLED"
)

// Propagator carries trace context in message attributes and callback
// headers: traceparent, and tracestate when it is not empty. No baggage:
// SQS takes ten attributes per message.
func Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

// FromEnv returns the tracer provider the OTEL_* environment asks for and
// the function that flushes its spans and stops it. Unless
// OTEL_TRACES_EXPORTER names an exporter (otlp, console; not none) and
// OTEL_SDK_DISABLED is not true, it is the no-op provider, with which
// nothing is instrumented (Enabled). Otherwise the SDK reads the rest of
// the standard variables: the exporter's endpoint and protocol, the
// sampler (OTEL_TRACES_SAMPLER), the batching (OTEL_BSP_*), the resource
// (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, over service.name
// transit). An exporter it does not know is an error naming the variable.
func FromEnv(ctx context.Context) (trace.TracerProvider, func(context.Context) error, error) {
	exporter := strings.TrimSpace(os.Getenv(ExporterVariable))
	if exporter == "" || strings.EqualFold(exporter, "none") || strings.EqualFold(strings.TrimSpace(os.Getenv(DisabledVariable)), "true") {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("%s=%s: %w", ExporterVariable, exporter, err)
	}
	res, err := serviceResource(ctx)
	if err != nil {
		return nil, nil, errors.Join(err, exp.Shutdown(ctx))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// serviceResource describes transit's spans: service.name transit unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES says otherwise, and the SDK.
func serviceResource(ctx context.Context) (*resource.Resource, error) {
	// Later sources win: the environment over transit's default name.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(ServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	return res, nil
}

// Enabled reports whether tp records anything: whether transit adds its
// instrumentation at all.
func Enabled(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case nil, noop.TracerProvider:
		return false
	}
	return true
}

// InstrumentAWS gives every AWS call made with cfg a client span under
// the span it was made in (a delivery, a timer callback): the DynamoDB
// calls of a command nest under its handling. Calls made outside any span
// cost one context lookup and are left out: the long polls, acks, lease
// renewals and scheduler polls that run all the time would each start a
// trace of its own, every few seconds, saying nothing. So are calls under
// a span the sampler dropped: its children are dropped too. A middleware of
// our own rather than otelaws, which builds every call's attributes
// before its tracer can decline the span (and is deprecated upstream).
func InstrumentAWS(cfg *aws.Config, tp trace.TracerProvider) {
	tracer := tp.Tracer(ScopeName)
	cfg.APIOptions = append(cfg.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("transit.trace",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if !trace.SpanFromContext(ctx).IsRecording() {
					return next.HandleInitialize(ctx, in)
				}
				service, operation := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
				ctx, span := tracer.Start(ctx, service+"."+operation, trace.WithSpanKind(trace.SpanKindClient),
					trace.WithAttributes(semconv.RPCSystemNameKey.String("aws-api"), semconv.RPCMethod(service+"/"+operation)))
				out, md, err := next.HandleInitialize(ctx, in)
				End(span, err)
				return out, md, err
			}), middleware.After)
	})
}
