package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/uuid"

	"transit/internal/metering"
	"transit/messages"
	"transit/store"
)

// LayerCase is the layer case: packages each publishing their versions
// one after another (layer.published, each sent once the previous one's
// answer is on the topic), every publication after a package's first
// deprecating the one before.
type LayerCase struct {
	Packages    int `json:"packages"`
	Versions    int `json:"versions"`
	Concurrency int `json:"concurrency"`
	// Elapsed runs from the first command sent to the last answer.
	Elapsed   time.Duration `json:"elapsed_ns"`
	PerSecond float64       `json:"commands_per_second"`
	// Anomalies counts answers other than layer.published with the
	// version latest.
	Anomalies int `json:"anomalies"`
	// Cost is the worker's over the run.
	Cost  metering.Report `json:"cost"`
	Floor perCommand      `json:"floor"`
}

// layerRegion is the region the layer case publishes in.
const layerRegion = "eu-west-1"

// runLayers runs the layer case: as many packages as consumer slots, each
// publishing versions 1 to versions.
func runLayers(ctx context.Context, o Options, c, versions int) (LayerCase, error) {
	lc := LayerCase{Packages: c, Versions: versions, Concurrency: c}
	prefix := "bl-" + uuid.NewString()[:6]
	svc, err := provisioned(ctx, prefix)
	if err != nil {
		return lc, err
	}
	st, err := openStack(ctx, svc, messages.Layer)
	if err != nil {
		return lc, err
	}
	defer st.close(ctx)
	stats := filepath.Join(o.OutDir, fmt.Sprintf("transit-layers-c%d.stats.json", c))
	w, err := startWorker(o.Executable, o.OutDir, RoleTransit, prefix, c, nil, "--domains", string(messages.Layer), "--stats-out", stats)
	if err != nil {
		return lc, err
	}
	w.stats = stats
	defer func() { _, _ = w.stop() }()
	// Warm-up: one publication per client, so the worker is up and its
	// connections are open before the figures start.
	if _, err := publishVersions(ctx, st, "warm", c, 1); err != nil {
		return lc, err
	}
	before, err := w.mark()
	if err != nil {
		return lc, err
	}
	began := time.Now()
	if lc.Anomalies, err = publishVersions(ctx, st, "bench", c, versions); err != nil {
		return lc, err
	}
	lc.Elapsed = time.Since(began)
	lc.PerSecond = float64(c*versions) / lc.Elapsed.Seconds()
	time.Sleep(time.Second) // the last deletes
	after, err := w.mark()
	if err != nil {
		return lc, err
	}
	lc.Cost = after.Minus(before)
	if lc.Floor, err = measureLayerFloor(ctx, "bfl-"+uuid.NewString()[:6], versions); err != nil {
		return lc, fmt.Errorf("floor: %w", err)
	}
	return lc, nil
}

// publishVersions has packages packages named after tag publish versions
// 1 to versions, each its next once the last is answered, and counts the
// answers other than layer.published.
func publishVersions(ctx context.Context, st *stack, tag string, packages, versions int) (anomalies int, err error) {
	var odd atomic.Int32
	errs := make(chan error, packages)
	var wg sync.WaitGroup
	for p := range packages {
		wg.Go(func() {
			pkg := fmt.Sprintf("%s-pkg-%02d", tag, p)
			for v := 1; v <= versions; v++ {
				ev, err := st.do(ctx, messages.LayerPublished, layerPublication(pkg, v))
				if err != nil {
					errs <- fmt.Errorf("%s version %d: %w", pkg, v, err)
					return
				}
				if ev.Envelope.Type != messages.LayerPublishedEvent {
					odd.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return int(odd.Load()), <-errs
}

func layerPublication(pkg string, version int) messages.LayerPublishedPayload {
	return messages.LayerPublishedPayload{
		LayerVersionPayload: messages.LayerVersionPayload{Region: layerRegion, Package: pkg, Version: version},
		ARN:                 fmt.Sprintf("arn:aws:lambda:%s:123456789012:layer:%s:%d", layerRegion, pkg, version),
	}
}

// minimumLayerRequests is the fewest AWS requests a publication needs
// besides the DynamoDB ones measured: SQS batched by ten and one event.
var minimumLayerRequests = map[string]float64{
	"SQS.ReceiveMessage":     0.1,
	"SQS.DeleteMessageBatch": 0.1,
	"SNS.Publish":            1,
}

// measureLayerFloor measures a publication's DynamoDB units in the layer
// table's own access pattern, one package publishing versions 1 to n:
// the version's item put as latest, the lyrVrsn0# pointer updated, and
// the previous version updated to deprecated with a TTL; plain writes, no
// outcome record.
func measureLayerFloor(ctx context.Context, prefix string, n int) (perCommand, error) {
	svc, meter, err := meteredStack(ctx, prefix, nil)
	if err != nil {
		return perCommand{}, err
	}
	table := aws.String(store.TableName(prefix, store.Layers))
	pk := store.LayerPK(layerRegion, "floor")
	before := meter.Report()
	now := time.Now().Unix()
	for v := 1; v <= n; v++ {
		p := layerPublication("floor", v)
		row := store.LayerVersion{PK: pk, SK: store.LayerSK(v), Region: p.Region, Package: p.Package, Version: v, ARN: p.ARN, Status: store.LayerLatest, PublishedAt: now}
		pointer := row
		pointer.SK, pointer.Status = store.LayerPointerSK, ""
		for _, item := range []store.LayerVersion{row, pointer} {
			av, err := attributevalue.MarshalMap(item)
			if err != nil {
				return perCommand{}, err
			}
			if _, err := svc.DynamoDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: av}); err != nil {
				return perCommand{}, err
			}
		}
		if v == 1 {
			continue
		}
		deprecate, err := expression.NewBuilder().WithUpdate(
			expression.Set(expression.Name("dplySts"), expression.Value(store.LayerDeprecated)).
				Set(expression.Name("deprecated_at"), expression.Value(now)).
				Set(expression.Name("ttl"), expression.Value(now+86400))).
			WithCondition(expression.AttributeExists(expression.Name("pk"))).Build()
		if err != nil {
			return perCommand{}, err
		}
		prev, err := attributevalue.MarshalMap(map[string]string{"pk": pk, "sk": store.LayerSK(v - 1)})
		if err != nil {
			return perCommand{}, err
		}
		if _, err := svc.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: table, Key: prev,
			UpdateExpression: deprecate.Update(), ConditionExpression: deprecate.Condition(),
			ExpressionAttributeNames: deprecate.Names(), ExpressionAttributeValues: deprecate.Values()}); err != nil {
			return perCommand{}, err
		}
	}
	p := costPerCommand(meter.Report().Minus(before), n, 1)
	maps.Copy(p.Requests, minimumLayerRequests)
	return p, nil
}

// write prints the layer case.
func (lc LayerCase) write(out io.Writer, w *tabwriter.Writer, r Report) {
	fmt.Fprintf(out, "\nLayers: %d packages each publishing versions 1 to %d in turn (layer.published, the next once the last is answered), consumer concurrency %d: %.1f commands/s",
		lc.Packages, lc.Versions, lc.Concurrency, lc.PerSecond)
	if lc.Anomalies > 0 {
		fmt.Fprintf(out, "; %d answers other than layer.published", lc.Anomalies)
	}
	fmt.Fprintln(out, "\nCost on AWS per publication (minimum: the layer table's own writes, the version put as latest, the pointer moved and the previous version deprecated; batched SQS and one event)")
	writeCosts(w, "publications", []string{"transit", "minimum"}, costPerCommand(lc.Cost, lc.Packages*lc.Versions, r.TransactUnitsScale), lc.Floor)
	r.writePriceNotes(out)
}
