#!/usr/bin/env bash
# make run: transit on a local emulator, with a short demo of the sandbox
# broker, of a layer's life (published, deprecated, removed, deleted), of
# durable timers, of an agent running a task that asks a question, and of
# a Nucleus schedule stopping and starting two EC2 instances (on moto).
# Starts moto server if nothing answers at AWS_ENDPOINT_URL, provisions the
# stack, starts a stand-in sandbox provider and `transit serve`, sends a few
# commands printing their events, then keeps serving until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
T=bin/transit
mkdir -p bin
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

if ! curl -fsS -o /dev/null "$AWS_ENDPOINT_URL/moto-api/" 2>/dev/null && ! curl -sS -o /dev/null "$AWS_ENDPOINT_URL" 2>/dev/null; then
  hostport=${AWS_ENDPOINT_URL#http://}
  echo "starting moto server on $hostport (log: bin/moto.log)"
  if command -v moto_server >/dev/null 2>&1; then
    moto_server -H "${hostport%:*}" -p "${hostport##*:}" >bin/moto.log 2>&1 & pids+=($!)
  else
    python3 -m moto.server -H "${hostport%:*}" -p "${hostport##*:}" >bin/moto.log 2>&1 & pids+=($!)
  fi
  for _ in $(seq 100); do curl -fsS -o /dev/null "$AWS_ENDPOINT_URL/moto-api/" 2>/dev/null && break; sleep 0.2; done
fi

$T provision
export TRANSIT_PROVIDER_URL=${TRANSIT_PROVIDER_URL:-http://127.0.0.1:8089}
$T provider-stub --listen "${TRANSIT_PROVIDER_URL#http://}" 2>bin/provider.log & pids+=($!)
# moto never expires TTL items nor marks a removal as TTL's: the demo plays
# a TTL removal by deleting the item, which the fan-in must then act on.
TRANSIT_LAYER_DELETE_ON_ANY_REMOVE=true $T serve 2>bin/serve.log & pids+=($!)
sleep 1

step() { echo; echo "== $*"; }
field() { sed -n "s/.*\"$1\": \"\\([^\"]*\\)\".*/\\1/p" | head -1; }

step "sync: the provider lists three sandboxes"
$T send sandbox.sync --wait --json '{"inventory":[
  {"external_id":"ext-1","name":"lab-1","lab_duration_hours":4},
  {"external_id":"ext-2","name":"lab-2","lab_duration_hours":4},
  {"external_id":"ext-3","name":"lab-3","lab_duration_hours":4}]}'
step "allocate a sandbox to track-42"
out=$($T send sandbox.allocate --track_id track-42 --wait); echo "$out"
sandbox=$(echo "$out" | field sandbox_id)
step "another track tries to release it"
$T send sandbox.mark-deletion --sandbox_id "$sandbox" --track_id track-7 --wait
step "its owner releases it"
$T send sandbox.mark-deletion --sandbox_id "$sandbox" --track_id track-42 --wait
step "cleanup sweep: the provider deletes it"
$T send sandbox.cleanup --wait
step "the pool now"
$T query sandboxes

# Layers: two versions of a package published to (emulated) Lambda; the
# second deprecates the first. moto never expires TTL items, so the demo
# deletes the deprecated item itself, as TTL would, and the stream fan-in
# (serving with TRANSIT_LAYER_DELETE_ON_ANY_REMOVE) deletes the layer
# version from Lambda.
lambda_layer() { python3 - "$@" <<'PY'
import io, os, sys, zipfile, boto3
buf = io.BytesIO()
with zipfile.ZipFile(buf, "w") as z:
    z.writestr("python/demo.py", "# demo layer\n")
lam = boto3.client("lambda", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1")
print(lam.publish_layer_version(LayerName=sys.argv[1], Content={"ZipFile": buf.getvalue()})["LayerVersionArn"])
PY
}
prefix=${TRANSIT_PREFIX:-transit}
step "layer requests v1 published"
$T send layer.published --wait --json "{\"region\":\"us-east-1\",\"package\":\"requests\",\"version\":1,\"arn\":\"$(lambda_layer "$prefix-requests")\"}"
step "layer requests v2 published: v1 is deprecated, with a TTL"
$T send layer.published --wait --json "{\"region\":\"us-east-1\",\"package\":\"requests\",\"version\":2,\"arn\":\"$(lambda_layer "$prefix-requests")\"}"
$T query layers --layer-region us-east-1
step "v1's TTL expires (played by deleting its item): the fan-in deletes it from Lambda"
$T watch --domain layer --type layer.version-deleted --count 1 --timeout 60s &
watcher=$!
sleep 1
python3 - "$prefix" <<'PY'
import os, sys, boto3
ddb = boto3.client("dynamodb", endpoint_url=os.environ.get("AWS_ENDPOINT_URL_DYNAMODB", os.environ["AWS_ENDPOINT_URL"]), region_name="us-east-1")
ddb.delete_item(TableName=sys.argv[1] + "-Layers", Key={"pk": {"S": "lyr#us-east-1.requests"}, "sk": {"S": "lyrVrsn#v1"}})
PY
wait "$watcher"
$T query layers --layer-region us-east-1

# Timers: a command scheduled for later (a timer whose callback sends a
# sandbox.sync to the sandbox queue), and a callback that keeps failing.
in3s=$(date -u -d '+3 seconds' +%Y-%m-%dT%H:%M:%SZ)
step "a timer: in 3 seconds, send the sandbox broker a sync (a command scheduled for later)"
$T watch --domain sandbox --type sandbox.synced --count 1 --timeout 60s &
watcher=$!
sleep 1
$T send timer.create --wait --json "{\"timer_id\":\"demo-resync\",\"execute_at\":\"$in3s\",
  \"callback\":\"sqs://$prefix-sandbox-commands\",
  \"payload\":{\"type\":\"sandbox.sync\",\"payload\":{\"inventory\":[
    {\"external_id\":\"ext-2\",\"name\":\"lab-2\",\"lab_duration_hours\":4},
    {\"external_id\":\"ext-3\",\"name\":\"lab-3\",\"lab_duration_hours\":4},
    {\"external_id\":\"ext-4\",\"name\":\"lab-4\",\"lab_duration_hours\":4}]}}}"
$T query timers
wait "$watcher"
step "a timer whose callback answers 404: retried twice, then timer.failed"
$T watch --domain timer --type timer.failed --count 1 --timeout 60s &
watcher=$!
sleep 1
$T send timer.create --json "{\"timer_id\":\"demo-broken\",\"execute_at\":\"$in3s\",
  \"callback\":\"$TRANSIT_PROVIDER_URL/no-such-hook\",\"retry_policy\":{\"max_attempts\":3,\"initial_interval\":\"500ms\"}}"
wait "$watcher"
$T query shards

# Agent tasks: an org with an owner, a member and a project; the member
# queues a task; the reference agent (`transit agent --once`) leases it and
# runs a script that asks a question (a stdout line `?? …`) and reads the
# answer on stdin. The demo answers as the member once the question is
# published, and tails the task's history until it ends.
step "an org with an owner and a member, and a project"
$T send org.created --org_id acme --name Acme --actor system --wait | field type
for user in owner:owner dev:member; do
  $T send user.registered --wait --json "{\"org_id\":\"acme\",\"user_id\":\"u-${user%:*}\",\"email\":\"${user%:*}@acme.test\",
    \"password\":\"correct horse battery\",\"display_name\":\"${user%:*}\",\"role\":\"${user#*:}\",\"actor\":\"system\"}" | field type
done
$T send project.created --org_id acme --project_id web --name Web --default_model claude-sonnet-4 --actor user:u-owner --wait | field type
step "u-dev queues a task"
$T send task.queued --wait --json '{"org_id":"acme","task_id":"t-1","project_id":"web","actor":"user:u-dev",
  "prompt":"Add a sessions table\nindexed by user_id"}' | field type
step "an agent runs it with a script that asks which database to use; u-dev answers (agent log: bin/agent.log)"
( $T watch --domain task --type task.awaiting-response --count 1 --timeout 60s >/dev/null 2>&1
  $T send task.response --org_id acme --task_id t-1 --response postgres --actor user:u-dev 2>/dev/null ) &
answerer=$!
$T tail task --org acme --every 200ms t-1 &
tailer=$!
sleep 1
$T agent --org acme --agent laptop-1 --once --capabilities interactive --exec '
  echo "reading the code"
  echo "planning: $TRANSIT_TASK_TITLE"
  echo "?? which database, postgres or sqlite?"
  read db
  echo "created the sessions table in $db"' 2>bin/agent.log
wait "$answerer" "$tailer"
$T query tasks --org acme --project web

# Nucleus: an AWS account registered with a role, a schedule whose start
# and stop windows are armed as durable timers, and the resources it starts
# and stops. moto's STS lets transit assume any role ARN, and the assumed
# credentials act in the role's account: with moto's default account, the
# instances created here with the demo's credentials are the ones transit
# acts on.
nucleus_ec2() { python3 - "$@" <<'PY'
import os, sys, boto3
ec2 = boto3.client("ec2", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1")
if sys.argv[1] == "run":
    out = ec2.run_instances(ImageId="ami-12c6146b", MinCount=2, MaxCount=2)
    print(" ".join(i["InstanceId"] for i in out["Instances"]))
else:
    for r in ec2.describe_instances(InstanceIds=sys.argv[2:])["Reservations"]:
        for i in r["Instances"]:
            print(f"  {i['InstanceId']}  {i['State']['Name']}")
PY
}
account=123456789012
role=arn:aws:iam::$account:role/nucleus-scheduler
step "Nucleus: two EC2 instances on moto, in account $account"
read -r inst1 inst2 <<<"$(nucleus_ec2 run)"
nucleus_ec2 state "$inst1" "$inst2"
step "register the account with the role transit assumes, and test it (STS AssumeRole)"
$T send account.registered --account_id $account --account_name demo --role_arn "$role" --user_id u-ops --wait | field type
$T send account.tested --account_id $account --user_id u-ops --wait
step "a schedule: up 08:00-19:00 Berlin time on weekdays; its next start and stop are armed as timers"
out=$($T send schedule.upserted --schedule_id sch-dev --schedule_name "Dev weekdays" \
  --start_cron '0 8 * * 1-5' --end_cron '0 19 * * 1-5' --timezone Europe/Berlin --user_id u-ops --wait); echo "$out"
next_start=$(echo "$out" | field next_start_at)
next_stop=$(echo "$out" | field next_stop_at)
step "attach both instances to it"
for inst in "$inst1" "$inst2"; do
  $T send resource.attached --schedule_id sch-dev --resource_arn "arn:aws:ec2:us-east-1:$account:instance/$inst" --user_id u-ops --wait | field type
done
$T query schedule sch-dev
# On a real stack the timers deliver these windows themselves, at 19:00 and
# 08:00 Berlin time; here `transit send` plays the timer, sending the same
# command for the window as armed, so the demo need not wait for them.
step "the stop window ($next_stop) is delivered, as its timer would: both instances stop"
$T send schedule.window-due --schedule_id sch-dev --edge stop --window_at "$next_stop" --wait
nucleus_ec2 state "$inst1" "$inst2"
step "the start window ($next_start) is delivered: both instances run again"
$T send schedule.window-due --schedule_id sch-dev --edge start --window_at "$next_start" --wait
nucleus_ec2 state "$inst1" "$inst2"
step "the schedule's history (every change and execution, one audit trail per entity)"
$T audit entity 'SCHEDULE#sch-dev'
step "the account's resources, with what their last window did"
$T query resources --account $account
echo
echo "transit serve keeps running (log: bin/serve.log). Open the console: http://127.0.0.1:9090/"
echo "Try:"
echo "  bin/transit send sandbox.allocate --track_id my-track --wait"
echo "  bin/transit query sandboxes --status allocated"
echo "  bin/transit send task.queued --org_id acme --task_id t-2 --project_id web --prompt 'Say hi' --actor user:u-dev"
echo "  bin/transit agent --org acme --agent laptop-1 --once --exec 'echo hi from \$TRANSIT_TASK_ID'"
echo "  bin/transit query schedules"
echo "  bin/transit audit recent --since 10m"
echo "Ctrl-C stops everything."
wait "${pids[-1]}"
