#!/usr/bin/env python3
"""move_tasks_client.py: the message move tasks over the wire, for
test/t/031_sqs_move_tasks.pl (AWS JSON 1.0, SigV4-signed; boto3 1.26 lacks
these actions).

    python3 move_tasks_client.py ENDPOINT KEYS PHASE

KEYS is "role=key:secret,..." for the roles mover, other and nobody.
Prints one line per assertion ("ok\tname" or "not ok\tname\tdetail") and
"value\tname\ttext" lines the test reads or prints.
"""
import base64
import json
import sys
import threading
import time
import urllib.error
import urllib.request

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

import os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves it out
from tap_lines import ACCOUNT, REGION, check, queue_arn, queue_url, sqs_client, value  # noqa: E402
ENDPOINT, KEYS, PHASE = sys.argv[1:4]
CREDS = {}
for part in KEYS.split(','):
    role, pair = part.split('=', 1)
    k, s = pair.split(':', 1)
    CREDS[role] = (k, s)


def arn(name):
    return queue_arn(name)


def call(role, action, payload):
    """One signed AWS JSON 1.0 request as role: (status, body, seconds)."""
    key, secret = CREDS[role]
    body = json.dumps(payload).encode()
    req = AWSRequest(method='POST', url=ENDPOINT + '/', data=body, headers={
        'Content-Type': 'application/x-amz-json-1.0',
        'X-Amz-Target': 'AmazonSQS.' + action})
    SigV4Auth(Credentials(key, secret), 'sqs', REGION).add_auth(req)
    r = urllib.request.Request(ENDPOINT + '/', data=body, method='POST',
                               headers=dict(req.headers.items()))
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(r, timeout=60) as resp:
            out = resp.status, json.loads(resp.read() or b'{}')
    except urllib.error.HTTPError as e:
        out = e.code, json.loads(e.read() or b'{}')
    return out[0], out[1], time.monotonic() - t0


def tasks(role, source, max_results=None):
    payload = {'SourceArn': arn(source)}
    if max_results:
        payload['MaxResults'] = max_results
    status, r, _ = call(role, 'ListMessageMoveTasks', payload)
    return status, r.get('Results', []), r


def phase_big():
    """A large move answers at once, runs in the background, and another
    role's requests on the same endpoint worker are not held up."""
    lat = []
    stop = threading.Event()

    def bystander():
        i = 0
        while not stop.is_set():
            _, _, s1 = call('other', 'ListQueues', {})
            st, _, s2 = call('other', 'SendMessage', {'QueueUrl': 'mv_other',
                                                       'MessageBody': 'b%d' % i})
            lat.extend([s1, s2])
            i += 1
            time.sleep(0.01)

    th = threading.Thread(target=bystander)
    th.start()
    time.sleep(0.1)
    t_asked = time.monotonic()
    status, r, secs = call('mover', 'StartMessageMoveTask', {
        'SourceArn': arn('mv_dlq'), 'DestinationArn': arn('mv_dest')})
    t_start = time.monotonic()
    value('start_ms', '%.1f' % (secs * 1000))
    check('StartMessageMoveTask answers with a TaskHandle',
          status == 200 and 'TaskHandle' in r, (status, r))
    check('StartMessageMoveTask answers at once (under 0.5 s)', secs < 0.5, secs)
    handle = r.get('TaskHandle')
    # SQS's handle: base64 of {"taskId": <a UUID>, "sourceArn": <the source>}
    try:
        doc = json.loads(base64.b64decode(handle or ''))
    except ValueError:
        doc = {}
    check('the TaskHandle is base64 of {"taskId", "sourceArn"}, as SQS\'s',
          isinstance(doc, dict) and doc.get('sourceArn') == arn('mv_dlq') and
          len(doc.get('taskId', '')) == 36 and doc['taskId'].count('-') == 4, (handle, doc))
    status, r, _ = call('mover', 'CancelMessageMoveTask', {'TaskHandle': 'foobared'})
    check('a TaskHandle that is no handle: InvalidParameterValue, in SQS\'s words',
          status == 400 and r.get('message') == 'Value for parameter TaskHandle is invalid.', (status, r))
    for what, doc2, words in (
            ('a source that does not exist', {'taskId': doc.get('taskId'), 'sourceArn': arn('mv_no_such_queue')},
             "The resource that you specified for the SourceArn parameter doesn't exist."),
            ('a task that does not exist', {'taskId': '10f57157-fc38-4da9-a113-4de7e12d05aa', 'sourceArn': arn('mv_dlq')},
             'Task does not exist.')):
        forged = base64.b64encode(json.dumps(doc2, separators=(',', ':')).encode()).decode()
        status, r, _ = call('mover', 'CancelMessageMoveTask', {'TaskHandle': forged})
        check('a handle naming %s: ResourceNotFoundException, in SQS\'s words' % what,
              status in (400, 404) and 'ResourceNotFound' in r.get('__type', '') and r.get('message') == words,
              (status, r))
    seen = []
    final = None
    while time.monotonic() - t_start < 120:
        st, res, raw = tasks('mover', 'mv_dlq')
        if st != 200 or not res:
            final = raw
            break
        t = res[0]
        if t.get('Status') == 'RUNNING':
            seen.append((t.get('ApproximateNumberOfMessagesMoved'), t.get('TaskHandle')))
        else:
            final = t
            break
        time.sleep(0.02)
    move_secs = time.monotonic() - t_asked
    stop.set()
    th.join()
    value('move_secs', '%.2f' % move_secs)
    value('bystander_max_ms', '%.1f' % (max(lat) * 1000 if lat else -1))
    value('bystander_requests', str(len(lat)))
    check('ListMessageMoveTasks shows it RUNNING, with its TaskHandle',
          len(seen) > 0 and all(h == handle for _, h in seen), seen[:3])
    moved = [m for m, _ in seen]
    check('RUNNING counts grow (moved part of it, then more)',
          len(set(moved)) >= 2 and moved == sorted(moved) and
          any(0 < m < 20000 for m in moved), moved)
    check('then COMPLETED, every message moved, no TaskHandle',
          final is not None and final.get('Status') == 'COMPLETED' and
          final.get('ApproximateNumberOfMessagesMoved') == 20000 and
          final.get('ApproximateNumberOfMessagesToMove') == 20000 and
          'TaskHandle' not in final and
          final.get('DestinationArn') == arn('mv_dest') and
          final.get('SourceArn') == arn('mv_dlq') and
          isinstance(final.get('StartedTimestamp'), int) and
          abs(final['StartedTimestamp'] / 1000 - time.time()) < 600, final)
    # (the move itself takes a while: what these check is that nobody
    # waits for it, the caller nor another role on the same worker)
    check('StartMessageMoveTask took under a fifth of the move',
          secs < move_secs / 5, (secs, move_secs))
    check('another role\'s ListQueues/SendMessage on the same worker answer in under 1 s, '
          'and under half the move',
          len(lat) > 0 and max(lat) < 1.0 and max(lat) < move_secs / 2,
          (lat and max(lat), move_secs))


def phase_rate():
    """The rate, one RUNNING task per source, who may cancel, cancel."""
    status, r, _ = call('mover', 'StartMessageMoveTask', {
        'SourceArn': arn('mv_dlq2'), 'DestinationArn': arn('mv_dest2'),
        'MaxNumberOfMessagesPerSecond': 50})
    t0 = time.monotonic()
    check('StartMessageMoveTask with MaxNumberOfMessagesPerSecond=50', status == 200, (status, r))
    handle = r.get('TaskHandle', 'none')
    status, r, _ = call('mover', 'StartMessageMoveTask', {
        'SourceArn': arn('mv_dlq2'), 'DestinationArn': arn('mv_dest2')})
    check('a second Start on a source with a RUNNING task: InvalidParameterValue',
          status == 400 and r.get('__type', '').endswith('InvalidParameterValueException') and
          'already a task running' in r.get('message', ''), (status, r))
    status, r, _ = call('mover', 'StartMessageMoveTask', {
        'SourceArn': arn('mv_dlq2'), 'MaxNumberOfMessagesPerSecond': 501})
    check('MaxNumberOfMessagesPerSecond 501: InvalidParameterValue', status == 400, (status, r))
    status, r, _ = call('mover', 'StartMessageMoveTask', {'SourceArn': arn('mv_dest2')})
    check('a source that is no dead-letter queue: InvalidParameterValue',
          status == 400 and 'Dead Letter Queue' in r.get('message', ''), (status, r))
    status, r, _ = call('mover', 'StartMessageMoveTask', {
        'SourceArn': arn('mv_dlq3'), 'DestinationArn': arn('mv_nosuch')})
    check('an unknown destination: ResourceNotFoundException',
          status in (400, 404) and 'ResourceNotFound' in r.get('__type', ''), (status, r))

    # someone without rights on the source sees nothing of it
    status, r, _ = call('nobody', 'CancelMessageMoveTask', {'TaskHandle': handle})
    check('a role without rights cannot cancel it (ResourceNotFoundException)',
          status in (400, 404) and 'ResourceNotFound' in r.get('__type', ''), (status, r))
    status, r, _ = call('nobody', 'ListMessageMoveTasks', {'SourceArn': arn('mv_dlq2')})
    check('nor list it', status in (400, 404) and 'ResourceNotFound' in r.get('__type', ''), (status, r))
    status, r, _ = call('nobody', 'StartMessageMoveTask', {'SourceArn': arn('mv_dlq2')})
    check('nor start one', status in (400, 404) and 'ResourceNotFound' in r.get('__type', ''), (status, r))

    time.sleep(max(0, 2.0 - (time.monotonic() - t0)))
    st, res, raw = tasks('mover', 'mv_dlq2')
    t = res[0] if res else {}
    moved = t.get('ApproximateNumberOfMessagesMoved', -1)
    value('rate_moved_after_2s', str(moved))
    check('at 50/s, after 2 s: RUNNING, some moved and fewer than 250',
          t.get('Status') == 'RUNNING' and 20 <= moved < 250 and
          t.get('MaxNumberOfMessagesPerSecond') == 50, raw)

    status, r, _ = call('mover', 'CancelMessageMoveTask', {'TaskHandle': handle})
    check('CancelMessageMoveTask answers ApproximateNumberOfMessagesMoved',
          status == 200 and isinstance(r.get('ApproximateNumberOfMessagesMoved'), int), (status, r))
    at_cancel = r.get('ApproximateNumberOfMessagesMoved')
    value('moved_at_cancel', str(at_cancel))
    st, res, raw = tasks('mover', 'mv_dlq2')
    t = res[0] if res else {}
    check('then CANCELLED, no TaskHandle', t.get('Status') == 'CANCELLED' and
          'TaskHandle' not in t and t.get('ApproximateNumberOfMessagesMoved') == at_cancel, raw)
    status, r, _ = call('mover', 'CancelMessageMoveTask', {'TaskHandle': handle})
    check('cancelling it again: ResourceNotFoundException',
          status in (400, 404) and 'ResourceNotFound' in r.get('__type', ''), (status, r))
    time.sleep(1.0)
    st, res, raw = tasks('mover', 'mv_dlq2')
    t = res[0] if res else {}
    check('a cancelled task moves nothing more',
          t.get('Status') == 'CANCELLED' and t.get('ApproximateNumberOfMessagesMoved') == at_cancel, raw)

    # a new task may start once none runs; the newest is listed first
    status, r, _ = call('mover', 'StartMessageMoveTask', {
        'SourceArn': arn('mv_dlq2'), 'DestinationArn': arn('mv_dest2'),
        'MaxNumberOfMessagesPerSecond': 1})
    check('a new task once none runs', status == 200, (status, r))
    h2 = r.get('TaskHandle')
    st, res, raw = tasks('mover', 'mv_dlq2')
    check('MaxResults defaults to 1: the newest', len(res) == 1 and res[0].get('TaskHandle') == h2, raw)
    st, res, raw = tasks('mover', 'mv_dlq2', 10)
    check('MaxResults 10: newest first', [x.get('Status') for x in res] == ['RUNNING', 'CANCELLED'], raw)
    status, r, _ = call('mover', 'CancelMessageMoveTask', {'TaskHandle': h2})
    check('cancelled', status == 200, (status, r))


def phase_restart_start():
    status, r, _ = call('mover', 'StartMessageMoveTask', {
        'SourceArn': arn('mv_dlq3'), 'DestinationArn': arn('mv_dest3'),
        'MaxNumberOfMessagesPerSecond': 300})
    check('a task to outlive a restart', status == 200 and 'TaskHandle' in r, (status, r))
    value('handle', r.get('TaskHandle', ''))


def phase_restart_end():
    st, res, raw = tasks('mover', 'mv_dlq3')
    t = res[0] if res else {}
    check('after the restart it ran to its end: COMPLETED, all 3000 moved',
          t.get('Status') == 'COMPLETED' and t.get('ApproximateNumberOfMessagesMoved') == 3000, raw)


def phase_recreated():
    st, res, raw = tasks('mover', 'mv_dlq', 10)
    check('a new queue of a dropped one\'s name lists none of its tasks',
          st == 200 and res == [], raw)


def phase_revoked_start():
    status, r, _ = call('other', 'StartMessageMoveTask', {
        'SourceArn': arn('mv_dlq4'), 'DestinationArn': arn('mv_dest4'),
        'MaxNumberOfMessagesPerSecond': 20})
    check('a task of a role granted manage on the source', status == 200, (status, r))


def phase_revoked_end():
    st, res, raw = tasks('mover', 'mv_dlq4')
    t = res[0] if res else {}
    check('its role lost manage: FAILED with a reason',
          t.get('Status') == 'FAILED' and 'permission denied' in t.get('FailureReason', ''), raw)


def phase_starve():
    """One role's 100 slow tasks (1 message a second each) do not keep
    another role's task from running: it completes within seconds."""
    started = 0
    for i in range(100):
        st, r, _ = call('mover', 'StartMessageMoveTask', {
            'SourceArn': arn('sv_dlq%d' % i), 'DestinationArn': arn('sv_dest'),
            'MaxNumberOfMessagesPerSecond': 1})
        started += st == 200
    check('one role started 100 slow tasks', started == 100, started)
    t0 = time.monotonic()
    st, r, _ = call('other', 'StartMessageMoveTask', {
        'SourceArn': arn('sv_odlq'), 'DestinationArn': arn('sv_odest')})
    check('another role started its task', st == 200, (st, r))
    took = None
    while time.monotonic() - t0 < 30:
        _, res, _ = tasks('other', 'sv_odlq', 1)
        if res and res[0].get('Status') == 'COMPLETED':
            took = time.monotonic() - t0
            break
        time.sleep(0.1)
    value('other_completed_s', 'never in 30 s' if took is None else '%.2f' % took)
    check('... and it completed within 5 s beside them', took is not None and took < 5, took)
    for i in range(100):
        _, res, _ = tasks('mover', 'sv_dlq%d' % i, 1)
        if res and res[0].get('Status') == 'RUNNING':
            call('mover', 'CancelMessageMoveTask', {'TaskHandle': res[0]['TaskHandle']})


{'big': phase_big, 'starve': phase_starve, 'rate': phase_rate, 'restart_start': phase_restart_start,
 'restart_end': phase_restart_end, 'recreated': phase_recreated,
 'revoked_start': phase_revoked_start, 'revoked_end': phase_revoked_end}[PHASE]()
