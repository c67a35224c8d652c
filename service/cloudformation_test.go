package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"transit/config"
	"transit/service"
)

// cfnTemplate generates the template of a stack named prefix, with the
// tests' queue settings.
func cfnTemplate(t *testing.T, prefix string) (*service.Service, []byte) {
	t.Helper()
	return cfnTemplateOf(t, testConfig(prefix, ""))
}

// cfnTemplateOf generates the template of the stack cfg configures.
func cfnTemplateOf(t *testing.T, cfg config.Config) (*service.Service, []byte) {
	t.Helper()
	svc, err := service.New(context.Background(), cfg)
	require.NoError(t, err)
	out, err := svc.CloudFormation()
	require.NoError(t, err)
	return svc, out
}

// TestCloudFormation_cfnLint: the template passes cfn-lint (errors and
// warnings alike), on demand and provisioned with auto-scaling.
func TestCloudFormation_cfnLint(t *testing.T) {
	lint, err := exec.LookPath("cfn-lint")
	if err != nil {
		t.Fatal("cfn-lint is not on PATH: run `make test`, which installs it (pip install cfn-lint)")
	}
	for _, mode := range []string{config.CapacityOnDemand, config.CapacityProvisioned} {
		t.Run(mode, func(t *testing.T) {
			cfg := testConfig("transit", "")
			cfg.Capacity = mode
			_, out := cfnTemplateOf(t, cfg)
			path := filepath.Join(t.TempDir(), "transit.template.json")
			require.NoError(t, os.WriteFile(path, out, 0o644))
			report, err := exec.Command(lint, "--", path).CombinedOutput()
			if err != nil {
				t.Fatalf("cfn-lint %s: %v\n%s", path, err, report)
			}
		})
	}
}

// TestCloudFormation_matchesProvision: the template's tables, queues,
// topics and subscriptions are those Provision creates on the emulators
// for the same prefix, with the same settings.
func TestCloudFormation_matchesProvision(t *testing.T) {
	ctx := context.Background()
	prefix := names.Prefix()
	svc, out := cfnTemplate(t, prefix)
	t.Cleanup(func() { removeStack(t, svc) })
	require.NoError(t, svc.Provision(ctx))

	tmpl := parseTemplate(t, out)
	want := tmpl.describe(t)
	got := describeEmulator(t, svc, prefix)
	assert.Equal(t, want.tables, got.tables, "tables: template (-) vs provisioned (+)")
	assert.Equal(t, want.queues, got.queues, "queues: template (-) vs provisioned (+)")
	assert.Equal(t, want.topics, got.topics, "topics: template (-) vs provisioned (+)")
	assert.Equal(t, want.subscriptions, got.subscriptions, "subscriptions: template (-) vs provisioned (+)")
	assert.NotEmpty(t, want.tables)
	assert.NotEmpty(t, want.subscriptions)
}

// stackView is a stack as sets of one-line facts, keyed by resource name,
// so a difference shows as a line.
type stackView struct {
	tables        map[string][]string
	queues        map[string][]string
	topics        []string
	subscriptions map[string][]string
}

// SQS's defaults, for the attributes provisioning leaves unset on a queue.
const (
	sqsDefaultVisibility = "30"
	sqsDefaultRetention  = "345600"
)

type template struct {
	prefix    string
	Resources map[string]struct {
		Type       string
		Properties map[string]any
	}
}

func parseTemplate(t *testing.T, out []byte) *template {
	var tmpl struct {
		Parameters map[string]struct{ Default string }
		template
	}
	require.NoError(t, json.Unmarshal(out, &tmpl))
	tmpl.template.prefix = tmpl.Parameters["Prefix"].Default
	return &tmpl.template
}

// str resolves a template value to a plain string: Fn::Sub with the
// Prefix parameter's default, and a Ref or GetAtt Arn to the name of the
// resource it points at (the emulator's ARNs are reduced to names too).
func (tp *template) str(t *testing.T, v any) string {
	t.Helper()
	switch v := v.(type) {
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case map[string]any:
		if s, ok := v["Fn::Sub"].(string); ok {
			s = strings.ReplaceAll(s, "${Prefix}", tp.prefix)
			require.NotContains(t, s, "${", "unresolved variable in %q", s)
			return s
		}
		if id, ok := v["Ref"].(string); ok {
			return tp.name(t, id)
		}
		if ga, ok := v["Fn::GetAtt"].([]any); ok && len(ga) == 2 && ga[1] == "Arn" {
			return tp.name(t, ga[0].(string))
		}
	}
	t.Fatalf("template value %v: not a string, Fn::Sub, Ref or GetAtt Arn", v)
	return ""
}

func (tp *template) name(t *testing.T, id string) string {
	t.Helper()
	r, ok := tp.Resources[id]
	require.True(t, ok, "no resource %s", id)
	for _, k := range []string{"TableName", "QueueName", "TopicName"} {
		if v, ok := r.Properties[k]; ok {
			return tp.str(t, v)
		}
	}
	t.Fatalf("resource %s has no name", id)
	return ""
}

func (tp *template) describe(t *testing.T) stackView {
	v := stackView{tables: map[string][]string{}, queues: map[string][]string{}, subscriptions: map[string][]string{}}
	policies := map[string][]string{}
	for id, r := range tp.Resources {
		p := r.Properties
		switch r.Type {
		case "AWS::DynamoDB::Table":
			attrTypes := map[string]string{}
			for _, a := range p["AttributeDefinitions"].([]any) {
				a := a.(map[string]any)
				attrTypes[a["AttributeName"].(string)] = a["AttributeType"].(string)
			}
			keys := func(ks any) string {
				var parts []string
				for _, k := range ks.([]any) {
					k := k.(map[string]any)
					name := k["AttributeName"].(string)
					parts = append(parts, name+" "+k["KeyType"].(string)+" "+attrTypes[name])
				}
				return strings.Join(parts, ", ")
			}
			// Units, only where provisioned: on demand has none.
			units := func(v any) string {
				pt, ok := v.(map[string]any)
				if !ok {
					return ""
				}
				return fmt.Sprintf("; %v/%v", pt["ReadCapacityUnits"], pt["WriteCapacityUnits"])
			}
			facts := []string{"keys: " + keys(p["KeySchema"]), "billing: " + p["BillingMode"].(string) + units(p["ProvisionedThroughput"])}
			for _, kind := range []string{"GlobalSecondaryIndexes", "LocalSecondaryIndexes"} {
				ixs, _ := p[kind].([]any)
				for _, ix := range ixs {
					ix := ix.(map[string]any)
					proj := ix["Projection"].(map[string]any)
					var include []string
					attrs, _ := proj["NonKeyAttributes"].([]any)
					for _, a := range attrs {
						include = append(include, a.(string))
					}
					facts = append(facts, fmt.Sprintf("%s %s: %s; %s%v%s", kind[:1], ix["IndexName"], keys(ix["KeySchema"]), proj["ProjectionType"], include, units(ix["ProvisionedThroughput"])))
				}
			}
			if s, ok := p["StreamSpecification"].(map[string]any); ok {
				facts = append(facts, "stream: "+s["StreamViewType"].(string))
			}
			if ttl, ok := p["TimeToLiveSpecification"].(map[string]any); ok && ttl["Enabled"] == true {
				facts = append(facts, "ttl: "+ttl["AttributeName"].(string))
			}
			slices.Sort(facts)
			v.tables[tp.str(t, p["TableName"])] = facts
		case "AWS::SQS::Queue":
			visibility, retention := sqsDefaultVisibility, sqsDefaultRetention
			if x, ok := p["VisibilityTimeout"]; ok {
				visibility = tp.str(t, x)
			}
			if x, ok := p["MessageRetentionPeriod"]; ok {
				retention = tp.str(t, x)
			}
			facts := []string{"visibility: " + visibility, "retention: " + retention}
			if rp, ok := p["RedrivePolicy"].(map[string]any); ok {
				facts = append(facts, "redrive: "+tp.str(t, rp["deadLetterTargetArn"])+" after "+tp.str(t, rp["maxReceiveCount"]))
			}
			v.queues[tp.str(t, p["QueueName"])] = facts
		case "AWS::SQS::QueuePolicy":
			queues := p["Queues"].([]any)
			require.Len(t, queues, 1, "%s: one queue per policy, as provisioning sets it", id)
			doc, err := json.Marshal(p["PolicyDocument"])
			require.NoError(t, err)
			policies[tp.str(t, queues[0])] = policyFacts(t, doc, func(v any) string { return tp.str(t, v) })
		case "AWS::SNS::Topic":
			v.topics = append(v.topics, tp.str(t, p["TopicName"]))
		case "AWS::SNS::Subscription":
			filter := ""
			if f, ok := p["FilterPolicy"]; ok {
				b, _ := json.Marshal(f)
				filter = string(b)
			}
			raw := "false"
			if r, ok := p["RawMessageDelivery"]; ok {
				raw = tp.str(t, r)
			}
			topic := tp.str(t, p["TopicArn"])
			v.subscriptions[topic] = append(v.subscriptions[topic], fmt.Sprintf("%s:%s raw=%s filter=%s", p["Protocol"], tp.str(t, p["Endpoint"]), raw, filter))
		}
	}
	for q, facts := range policies {
		v.queues[q] = append(v.queues[q], facts...)
	}
	for q := range v.queues {
		slices.Sort(v.queues[q])
	}
	slices.Sort(v.topics)
	return v
}

// policyFacts reduces a queue policy to its statements, one line each;
// name turns a resource or source ARN into a name.
func policyFacts(t *testing.T, doc []byte, name func(any) string) []string {
	var p struct {
		Statement []struct {
			Effect    string
			Principal struct{ Service string }
			Action    any
			Resource  any
			Condition map[string]map[string]any
		}
	}
	require.NoError(t, json.Unmarshal(doc, &p), "%s", doc)
	list := func(v any, name func(any) string) []string {
		var out []string
		switch v := v.(type) {
		case []any:
			for _, x := range v {
				out = append(out, name(x))
			}
		default:
			out = append(out, name(v))
		}
		slices.Sort(out)
		return out
	}
	plain := func(v any) string { return fmt.Sprint(v) }
	var facts []string
	for _, s := range p.Statement {
		var conds []string
		for op, kv := range s.Condition {
			for k, v := range kv {
				conds = append(conds, fmt.Sprintf("%s %s %v", op, k, list(v, name)))
			}
		}
		slices.Sort(conds)
		facts = append(facts, fmt.Sprintf("policy: %s %s %v on %v if %v", s.Effect, s.Principal.Service, list(s.Action, plain), list(s.Resource, name), conds))
	}
	return facts
}

// arnName is the name at the end of an SQS or SNS ARN.
func arnName(v any) string {
	s, _ := v.(string)
	return s[strings.LastIndex(s, ":")+1:]
}

// describeEmulator lists what Provision created under prefix, with
// Describe and List calls.
func describeEmulator(t *testing.T, svc *service.Service, prefix string) stackView {
	ctx := context.Background()
	v := stackView{tables: map[string][]string{}, queues: map[string][]string{}, subscriptions: map[string][]string{}}
	mine := func(name string) bool { return strings.HasPrefix(name, prefix+"-") }

	tables := dynamodb.NewListTablesPaginator(svc.DynamoDB, &dynamodb.ListTablesInput{})
	for tables.HasMorePages() {
		page, err := tables.NextPage(ctx)
		require.NoError(t, err)
		for _, name := range page.TableNames {
			if mine(name) {
				v.tables[name] = tableFacts(t, svc.DynamoDB, name)
			}
		}
	}

	queues, err := svc.SQS.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(prefix + "-"), MaxResults: aws.Int32(1000)})
	require.NoError(t, err)
	for _, url := range queues.QueueUrls {
		attrs, err := svc.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
		require.NoError(t, err)
		a := attrs.Attributes
		facts := []string{"visibility: " + a["VisibilityTimeout"], "retention: " + a["MessageRetentionPeriod"]}
		if rp := a["RedrivePolicy"]; rp != "" {
			var r struct {
				DeadLetterTargetArn string
				MaxReceiveCount     any
			}
			require.NoError(t, json.Unmarshal([]byte(rp), &r))
			facts = append(facts, fmt.Sprintf("redrive: %s after %v", arnName(r.DeadLetterTargetArn), r.MaxReceiveCount))
		}
		if p := a["Policy"]; p != "" {
			facts = append(facts, policyFacts(t, []byte(p), arnName)...)
		}
		slices.Sort(facts)
		v.queues[url[strings.LastIndex(url, "/")+1:]] = facts
	}

	topics := sns.NewListTopicsPaginator(svc.SNS, &sns.ListTopicsInput{})
	for topics.HasMorePages() {
		page, err := topics.NextPage(ctx)
		require.NoError(t, err)
		for _, tp := range page.Topics {
			name := arnName(aws.ToString(tp.TopicArn))
			if !mine(name) {
				continue
			}
			v.topics = append(v.topics, name)
			subs := sns.NewListSubscriptionsByTopicPaginator(svc.SNS, &sns.ListSubscriptionsByTopicInput{TopicArn: tp.TopicArn})
			for subs.HasMorePages() {
				page, err := subs.NextPage(ctx)
				require.NoError(t, err)
				for _, s := range page.Subscriptions {
					attrs, err := svc.SNS.GetSubscriptionAttributes(ctx, &sns.GetSubscriptionAttributesInput{SubscriptionArn: s.SubscriptionArn})
					require.NoError(t, err)
					raw := attrs.Attributes["RawMessageDelivery"]
					if raw == "" {
						raw = "false"
					}
					v.subscriptions[name] = append(v.subscriptions[name], fmt.Sprintf("%s:%s raw=%s filter=%s",
						aws.ToString(s.Protocol), arnName(aws.ToString(s.Endpoint)), raw, attrs.Attributes["FilterPolicy"]))
				}
			}
		}
	}
	slices.Sort(v.topics)
	return v
}

func tableFacts(t *testing.T, db *dynamodb.Client, name string) []string {
	ctx := context.Background()
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	require.NoError(t, err)
	d := out.Table
	attrTypes := map[string]string{}
	for _, a := range d.AttributeDefinitions {
		attrTypes[aws.ToString(a.AttributeName)] = string(a.AttributeType)
	}
	keys := func(ks []types.KeySchemaElement) string {
		var parts []string
		for _, k := range ks {
			n := aws.ToString(k.AttributeName)
			parts = append(parts, n+" "+string(k.KeyType)+" "+attrTypes[n])
		}
		return strings.Join(parts, ", ")
	}
	billing := "PROVISIONED"
	if d.BillingModeSummary != nil {
		billing = string(d.BillingModeSummary.BillingMode)
	}
	// Units, only where provisioned: on demand, DynamoDB reports 0/0.
	units := func(pt *types.ProvisionedThroughputDescription) string {
		switch {
		case billing != string(types.BillingModeProvisioned):
			return ""
		case pt == nil:
			return "; none"
		}
		return fmt.Sprintf("; %d/%d", aws.ToInt64(pt.ReadCapacityUnits), aws.ToInt64(pt.WriteCapacityUnits))
	}
	facts := []string{"keys: " + keys(d.KeySchema), "billing: " + billing + units(d.ProvisionedThroughput)}
	for _, ix := range d.GlobalSecondaryIndexes {
		facts = append(facts, fmt.Sprintf("G %s: %s; %s%v%s", aws.ToString(ix.IndexName), keys(ix.KeySchema), ix.Projection.ProjectionType, ix.Projection.NonKeyAttributes, units(ix.ProvisionedThroughput)))
	}
	for _, ix := range d.LocalSecondaryIndexes {
		facts = append(facts, fmt.Sprintf("L %s: %s; %s%v", aws.ToString(ix.IndexName), keys(ix.KeySchema), ix.Projection.ProjectionType, ix.Projection.NonKeyAttributes))
	}
	if s := d.StreamSpecification; s != nil && aws.ToBool(s.StreamEnabled) {
		facts = append(facts, "stream: "+string(s.StreamViewType))
	}
	ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	require.NoError(t, err)
	if td := ttl.TimeToLiveDescription; td != nil &&
		(td.TimeToLiveStatus == types.TimeToLiveStatusEnabled || td.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		facts = append(facts, "ttl: "+aws.ToString(td.AttributeName))
	}
	slices.Sort(facts)
	return facts
}

// notServed are the SDK operations in transit's binary that the runtime
// policy leaves out, and why: a new call must be granted or listed here.
var notServed = map[string]string{
	"dynamodb.CreateTable":                            "provisioning",
	"dynamodb.UpdateTable":                            "provisioning (a stream on an existing table; switching a table's billing mode)",
	"dynamodb.DescribeTimeToLive":                     "provisioning",
	"dynamodb.UpdateTimeToLive":                       "provisioning",
	"dynamodb.DeleteTable":                            "deprovisioning",
	"dynamodb.TransactWriteItems":                     "no IAM action of its own: authorized item by item (PutItem, UpdateItem, DeleteItem, ConditionCheckItem)",
	"sqs.CreateQueue":                                 "provisioning, `transit send --wait`'s tap, the reference agent; Watermill's create-if-missing is off",
	"sqs.SetQueueAttributes":                          "provisioning, the tap, the reference agent (queue policies); Watermill's SNS subscriber, unused",
	"sqs.DeleteQueue":                                 "deprovisioning, the tap, the reference agent",
	"sns.CreateTopic":                                 "provisioning; Watermill's create-if-missing is off",
	"sns.Subscribe":                                   "provisioning, the tap, the reference agent",
	"sns.Unsubscribe":                                 "deprovisioning, the tap, the reference agent",
	"sns.ListTopics":                                  "deprovisioning",
	"sns.ListSubscriptionsByTopic":                    "deprovisioning",
	"sns.DeleteTopic":                                 "deprovisioning",
	"kms.CreateKey":                                   "TRANSIT_KMS_KEY=auto only (development): production names its key",
	"applicationautoscaling.RegisterScalableTarget":   "provisioning (TRANSIT_CAPACITY=provisioned)",
	"applicationautoscaling.PutScalingPolicy":         "provisioning (TRANSIT_CAPACITY=provisioned)",
	"applicationautoscaling.DescribeScalingPolicies":  "deprovisioning, and provisioning a provisioned stack on demand",
	"applicationautoscaling.DeleteScalingPolicy":      "deprovisioning, and provisioning a provisioned stack on demand",
	"applicationautoscaling.DescribeScalableTargets":  "deprovisioning, and provisioning a provisioned stack on demand",
	"applicationautoscaling.DeregisterScalableTarget": "deprovisioning, and provisioning a provisioned stack on demand",
	"kms.CreateAlias":                                 "TRANSIT_KMS_KEY=auto only",
	"kms.DescribeKey":                                 "TRANSIT_KMS_KEY=auto only",
	"kms.ScheduleKeyDeletion":                         "TRANSIT_KMS_KEY=auto only",
	"ec2.DescribeInstances":                           "Nucleus, with the assumed customer role",
	"ec2.StartInstances":                              "Nucleus, with the assumed customer role",
	"ec2.StopInstances":                               "Nucleus, with the assumed customer role",
	"rds.DescribeDBInstances":                         "Nucleus, with the assumed customer role",
	"rds.StartDBInstance":                             "Nucleus, with the assumed customer role",
	"rds.StopDBInstance":                              "Nucleus, with the assumed customer role",
	"ecs.DescribeServices":                            "Nucleus, with the assumed customer role",
	"ecs.UpdateService":                               "Nucleus, with the assumed customer role",
}

// TestCloudFormation_policy: the runtime policy grants no wildcard action
// and nothing transit's code does not call; every call in the binary is
// granted or listed in notServed with its reason.
func TestCloudFormation_policy(t *testing.T) {
	_, out := cfnTemplate(t, "transit")
	var tmpl struct {
		Resources map[string]struct {
			Type       string
			Properties struct {
				PolicyDocument struct{ Statement []json.RawMessage }
			}
		}
	}
	require.NoError(t, json.Unmarshal(out, &tmpl))
	type statement struct {
		Sid, Effect string
		Action      []string
		Resource    any
	}
	var statements []statement
	for _, r := range tmpl.Resources {
		if r.Type != "AWS::IAM::ManagedPolicy" {
			continue
		}
		for _, raw := range r.Properties.PolicyDocument.Statement {
			// An optional statement is {"Fn::If": [condition, statement, NoValue]}.
			var cond struct {
				If []json.RawMessage `json:"Fn::If"`
			}
			if json.Unmarshal(raw, &cond) == nil && len(cond.If) == 3 {
				raw = cond.If[1]
			}
			var s statement
			require.NoError(t, json.Unmarshal(raw, &s), "%s", raw)
			statements = append(statements, s)
		}
	}
	require.NotEmpty(t, statements, "no IAM managed policy in the template")

	calls := sdkCalls(t)
	reasons := service.RuntimeActions()
	granted := map[string]bool{}
	actionName := regexp.MustCompile(`^[a-z0-9-]+:[A-Za-z0-9]+$`)
	for _, s := range statements {
		assert.Equal(t, "Allow", s.Effect, s.Sid)
		for _, a := range s.Action {
			granted[a] = true
			if !actionName.MatchString(a) {
				t.Errorf("statement %s: action %q is not one plain service:Action (no wildcard)", s.Sid, a)
			}
			used := slices.ContainsFunc(reasons[a], func(op string) bool { return len(calls[op]) > 0 })
			if !used {
				t.Errorf("statement %s grants %s, which no call in transit's code needs (it names %v)", s.Sid, a, reasons[a])
			}
		}
		if res, ok := s.Resource.([]any); ok && slices.Contains(res, any("*")) && !slices.Equal(s.Action, []string{"sts:GetCallerIdentity"}) {
			t.Errorf("statement %s: resource * for %v", s.Sid, s.Action)
		}
	}
	for a := range reasons {
		assert.True(t, granted[a], "RuntimeActions names %s, which the policy does not grant", a)
	}

	needed := map[string]bool{}
	for _, ops := range reasons {
		for _, op := range ops {
			needed[op] = true
		}
	}
	var ungranted []string
	for op, where := range calls {
		if !needed[op] && notServed[op] == "" {
			ungranted = append(ungranted, op+" ("+strings.Join(where, ", ")+")")
		}
	}
	slices.Sort(ungranted)
	assert.Empty(t, ungranted, "calls neither granted by the runtime policy (service/cloudformation.go) nor listed in notServed")
	for op, why := range notServed {
		assert.NotEmpty(t, calls[op], "notServed lists %s (%s), which no code calls any more", op, why)
	}
}

// sdkCalls finds the AWS operations compiled into cmd/transit, from
// transit's own packages and the Watermill AWS ones, which call SQS and
// SNS for it. An operation shows by its request type (sqs.SendMessageInput)
// or paginator; a transaction's items by their kind (types.Delete), and
// the assumed role by stscreds's provider. It returns each operation's
// places.
func sdkCalls(t *testing.T) map[string][]string {
	goCmd, err := exec.LookPath("go")
	require.NoError(t, err)
	list, err := exec.Command(goCmd, "list", "-deps", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \",\"}}", "transit/cmd/transit").Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("go list: %v\n%s", err, exit.Stderr)
	}
	require.NoError(t, err)
	const sdk = "github.com/aws/aws-sdk-go-v2/"
	opPattern := regexp.MustCompile(`^(?:([A-Z]\w*)Input|New(\w+)Paginator)$`)
	calls := map[string][]string{}
	fset := token.NewFileSet()
	for line := range strings.Lines(string(list)) {
		fields := strings.Split(strings.TrimSpace(line), "\t")
		if len(fields) != 3 || fields[2] == "" ||
			!strings.HasPrefix(fields[0], "transit/") && !strings.HasPrefix(fields[0], "github.com/ThreeDotsLabs/watermill-aws/") ||
			// They name DynamoDB request types to read each call's
			// capacity and table, and make no call.
			fields[0] == "transit/internal/awscall" || fields[0] == "transit/metrics" {
			continue
		}
		for _, file := range strings.Split(fields[2], ",") {
			path := filepath.Join(fields[1], file)
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			require.NoError(t, err)
			// Local import name → SDK package: a service ("sqs"), a
			// service's types ("dynamodb/types") or "stscreds".
			imports := map[string]string{}
			for _, spec := range f.Imports {
				p, _ := strconv.Unquote(spec.Path.Value)
				var pkg string
				switch {
				case strings.HasPrefix(p, sdk+"service/"):
					pkg = strings.TrimPrefix(p, sdk+"service/")
				case p == sdk+"credentials/stscreds":
					pkg = "stscreds"
				default:
					continue
				}
				local := p[strings.LastIndex(p, "/")+1:]
				if spec.Name != nil {
					local = spec.Name.Name
				}
				imports[local] = pkg
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, ok := sel.X.(*ast.Ident)
				if !ok || imports[x.Name] == "" {
					return true
				}
				pkg, name := imports[x.Name], sel.Sel.Name
				var op string
				switch {
				case pkg == "stscreds" && name == "NewAssumeRoleProvider":
					op = "sts.AssumeRole"
				case pkg == "dynamodb/types" && slices.Contains([]string{"Put", "Update", "Delete", "ConditionCheck"}, name):
					op = "dynamodb.TransactWriteItems." + name
				case !strings.Contains(pkg, "/"):
					if m := opPattern.FindStringSubmatch(name); m != nil {
						op = pkg + "." + m[1] + m[2]
					}
				}
				if op != "" {
					pos := fset.Position(sel.Pos())
					where := fields[0] + "/" + file + ":" + strconv.Itoa(pos.Line)
					if !slices.Contains(calls[op], where) {
						calls[op] = append(calls[op], where)
					}
				}
				return true
			})
		}
	}
	require.NotEmpty(t, calls["dynamodb.GetItem"], "the scan found no DynamoDB call: is it reading the right packages?")
	return calls
}
