#!/usr/bin/env python3
"""role_shares_client.py: one role's long polls at their bound, and another
role's calls beside them (issue 48), for test/t/045_sqs_role_shares.pl (a
node's parked long polls) and test/t/037_citus.pl (forwarded ones).

    python3 role_shares_client.py ENDPOINT HOG_KEY:SECRET HOG_QUEUE N WAIT \\
        OTHER_KEY:SECRET OTHER_QUEUE

Opens N ReceiveMessage calls (WaitTimeSeconds=WAIT) of the hog's queue at
once, each on its own connection; 1.5 s later the other role sends to its
queue and, when it may receive there, receives (a short ReceiveMessage).
Prints "value" lines (tap_lines.py): how many of the hog's calls were
answered 503 and how soon, the other's latencies (ms) or its error.
"""
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves it out
from tap_lines import REGION, queue_url, value  # noqa: E402

ENDPOINT, HOG, HOG_QUEUE, N, WAIT, OTHER, OTHER_QUEUE = sys.argv[1:8]
N, WAIT = int(N), int(WAIT)


def call(cred, action, payload, timeout=60):
    """One signed AWS JSON 1.0 request on a new connection: (status, body, seconds)."""
    key, secret = cred.split(':', 1)
    body = json.dumps(payload).encode()
    req = AWSRequest(method='POST', url=ENDPOINT + '/', data=body, headers={
        'Content-Type': 'application/x-amz-json-1.0',
        'X-Amz-Target': 'AmazonSQS.' + action})
    SigV4Auth(Credentials(key, secret), 'sqs', REGION).add_auth(req)
    r = urllib.request.Request(ENDPOINT + '/', data=body, method='POST',
                               headers=dict(req.headers.items()))
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(r, timeout=timeout) as resp:
            out = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        out = e.code, e.read()
    except Exception as e:  # the connection refused or closed
        out = 0, str(e).encode()
    return out[0], out[1], time.monotonic() - t0


answers = []
lock = threading.Lock()


def hog():
    st, body, s = call(HOG, 'ReceiveMessage', {'QueueUrl': queue_url(ENDPOINT, HOG_QUEUE),
                                              'WaitTimeSeconds': WAIT})
    with lock:
        answers.append((st, s, body))


threads = [threading.Thread(target=hog) for _ in range(N)]
for t in threads:
    t.start()
time.sleep(1.5)
st, body, s = call(OTHER, 'SendMessage', {'QueueUrl': queue_url(ENDPOINT, OTHER_QUEUE),
                                         'MessageBody': 'beside the hog'}, timeout=10)
value('other_send_status', st)
value('other_send_ms', '%.0f' % (s * 1000))
if st != 200:
    value('other_send_error', body.decode(errors='replace')[:300].replace('\n', ' '))
st, body, s = call(OTHER, 'ReceiveMessage', {'QueueUrl': queue_url(ENDPOINT, OTHER_QUEUE),
                                            'WaitTimeSeconds': 0}, timeout=10)
value('other_receive_status', st)
value('other_receive_ms', '%.0f' % (s * 1000))
with lock:
    early = [a for a in answers if a[0] == 503]
value('hog_refused_early', len(early))
value('hog_refused_max_ms', '%.0f' % (max([a[1] for a in early], default=0) * 1000))
if early:
    value('hog_refusal', early[0][2].decode(errors='replace')[:200].replace('\n', ' '))
for t in threads:
    t.join()
value('hog_answers', ','.join('%d:%d' % (code, sum(1 for a in answers if a[0] == code))
                              for code in sorted({a[0] for a in answers})))
