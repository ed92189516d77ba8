#!/usr/bin/env bash
# examples/sqs/aws_cli.sh: the AWS CLI against the queue extension's SQS
# endpoint (Debian's awscli 2.9, which speaks SQS's Query protocol).
#
# The same three things as python_boto3.py, each checked:
#   fifo         a FIFO queue: two message groups sent in order and one
#                duplicate (same deduplication id); received in group order,
#                the duplicate once
#   dead-letter  RedrivePolicy with maxReceiveCount 2: a message received
#                twice and never deleted moves to the dead-letter queue
#   long poll    receive-message --wait-time-seconds 5 answered by a send
#                from a second CLI process before the deadline
#
#   SQS_ENDPOINT_URL=http://127.0.0.1:9324 AWS_ACCESS_KEY_ID=... \
#   AWS_SECRET_ACCESS_KEY=... AWS_DEFAULT_REGION=us-east-1 bash examples/sqs/aws_cli.sh
#
# AWS_CLI (default /usr/bin/aws, Debian's) and PYTHON (default
# /usr/bin/python3, which reads the CLI's JSON) choose the programs.  Queues
# are named cli<pid>-... and deleted at the end.  Prints "fifo ok",
# "dead-letter ok", "long poll ok (...)"; exits 1 on the first mismatch.

set -euo pipefail
AWS=${AWS_CLI:-/usr/bin/aws}
PY=${PYTHON:-/usr/bin/python3}
EP=${SQS_ENDPOINT_URL:-http://127.0.0.1:9324}
P="cli$$-"
export AWS_PAGER="" AWS_DEFAULT_OUTPUT=json

sqs() { "$AWS" --endpoint-url "$EP" --output json sqs "$@"; }
fail() {
	echo "FAILED: $*"
	exit 1
}
# jget EXPR: print EXPR evaluated over the JSON on stdin as d ({} when empty)
jget() {
	"$PY" -I -c 'import json, sys
t = sys.stdin.read()
d = json.loads(t) if t.strip() else {}
r = eval(sys.argv[1])
print(r if not isinstance(r, (dict, list)) else json.dumps(r))' "$1"
}

# --- fifo ---------------------------------------------------------------
fifo=$(sqs create-queue --queue-name "${P}orders.fifo" --attributes FifoQueue=true | jget 'd["QueueUrl"]')
for m in g1:g1-a g2:g2-a g1:g1-b g2:g2-b g1:g1-c; do
	seq=$(sqs send-message --queue-url "$fifo" --message-body "${m#*:}" \
		--message-group-id "${m%%:*}" --message-deduplication-id "${m#*:}" |
		jget 'd.get("SequenceNumber", "")')
	[ -n "$seq" ] || fail "FIFO send of $m returned no SequenceNumber"
done
sqs send-message --queue-url "$fifo" --message-body g1-a --message-group-id g1 \
	--message-deduplication-id g1-a | jget 'd["MessageId"]' >/dev/null ||
	fail "a duplicate send is accepted"
g1="" g2="" n=0
for _ in $(seq 1 10); do
	out=$(sqs receive-message --queue-url "$fifo" --max-number-of-messages 10 \
		--wait-time-seconds 1 --attribute-names MessageGroupId)
	while IFS=' ' read -r group body receipt; do
		[ -n "$group" ] || continue
		case $group in
			g1) g1="$g1 $body" ;;
			g2) g2="$g2 $body" ;;
			*) fail "unexpected group $group" ;;
		esac
		n=$((n + 1))
		sqs delete-message --queue-url "$fifo" --receipt-handle "$receipt" </dev/null
	done < <(echo "$out" | jget '"\n".join(m["Attributes"]["MessageGroupId"] + " " + m["Body"] + " " + m["ReceiptHandle"] for m in d.get("Messages", []))')
	[ "$n" -ge 5 ] && break
done
[ "$g1" = " g1-a g1-b g1-c" ] || fail "group g1 received as [$g1]"
[ "$g2" = " g2-a g2-b" ] || fail "group g2 received as [$g2]"
left=$(sqs receive-message --queue-url "$fifo" --max-number-of-messages 10 --wait-time-seconds 1 |
	jget 'len(d.get("Messages", []))')
[ "$left" = 0 ] || fail "$left messages left after both groups (the duplicate delivered?)"
sqs delete-queue --queue-url "$fifo"
echo "fifo ok"

# --- dead-letter ----------------------------------------------------------
dlq=$(sqs create-queue --queue-name "${P}dead" | jget 'd["QueueUrl"]')
arn=$(sqs get-queue-attributes --queue-url "$dlq" --attribute-names QueueArn |
	jget 'd["Attributes"]["QueueArn"]')
case $arn in arn:aws:sqs:*:"${P}dead") ;; *) fail "QueueArn $arn" ;; esac
attrs=$(ARN=$arn "$PY" -I -c 'import json, os
print(json.dumps({"RedrivePolicy": json.dumps({"deadLetterTargetArn": os.environ["ARN"], "maxReceiveCount": "2"})}))')
work=$(sqs create-queue --queue-name "${P}work" --attributes "$attrs" | jget 'd["QueueUrl"]')
sqs send-message --queue-url "$work" --message-body poison >/dev/null
receives=0 moved=""
for _ in $(seq 1 15); do
	got=$(sqs receive-message --queue-url "$work" --visibility-timeout 1 --wait-time-seconds 2 |
		jget '" ".join(m["Body"] for m in d.get("Messages", []))')
	if [ -n "$got" ]; then
		[ "$got" = poison ] || fail "received [$got]"
		receives=$((receives + 1))
	fi
	moved=$(sqs receive-message --queue-url "$dlq" |
		jget '" ".join(m["Body"] for m in d.get("Messages", []))')
	[ -n "$moved" ] && break
done
[ "$moved" = poison ] || fail "dead-letter queue holds [$moved]"
[ "$receives" = 2 ] || fail "received $receives times before the move (maxReceiveCount 2)"
sources=$(sqs list-dead-letter-source-queues --queue-url "$dlq" | jget '" ".join(d.get("queueUrls", []))')
case $sources in *"/${P}work") ;; *) fail "list-dead-letter-source-queues: [$sources]" ;; esac
sqs delete-queue --queue-url "$work"
sqs delete-queue --queue-url "$dlq"
echo "dead-letter ok"

# --- long poll --------------------------------------------------------------
poll=$(sqs create-queue --queue-name "${P}poll" | jget 'd["QueueUrl"]')
(sleep 1 && sqs send-message --queue-url "$poll" --message-body "wake up" >/dev/null) &
sender=$!
t0=$(date +%s%N)
got=$(sqs receive-message --queue-url "$poll" --wait-time-seconds 5 |
	jget '" ".join(m["Body"] for m in d.get("Messages", []))')
t1=$(date +%s%N)
wait "$sender" || fail "the second CLI's send failed"
ms=$(((t1 - t0) / 1000000))
[ "$got" = "wake up" ] || fail "long poll got [$got]"
# the send lands about 1 s (plus a CLI start) in; the deadline is 5 s plus a CLI start
[ "$ms" -ge 1000 ] && [ "$ms" -lt 5000 ] || fail "long poll returned after $ms ms"
sqs delete-queue --queue-url "$poll"
echo "long poll ok (returned after $ms ms of 5000)"
