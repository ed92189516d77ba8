#!/usr/bin/python3
"""sqs_connections.py: many connections to the SQS endpoint at once, for
027_sqs_connections.pl.  Debian's /usr/bin/python3 -I (its botocore signs).

    sqs_connections.py PORT ACCESS_KEY SECRET N QUEUE_URL WORKER_PIDS

Raises its own open-files limit, then opens min(N, hard limit - 100)
connections: a third send half a request line and headers, a third the
headers and half a body, a third nothing.  While they are all open it
times signed ListQueues requests on new connections; starts a slow client
that sends a signed request one byte per 100 ms for 3 s, times requests
meanwhile, then sends the rest and reads its answer; reads the workers'
Pss (/proc/PID/smaps_rollup) and their open sockets; starts a
ReceiveMessage (WaitTimeSeconds 20, VisibilityTimeout 600) on QUEUE_URL
and closes it after 0.5 s.  Prints one JSON object with what it saw.
"""
import json
import os
import resource
import socket
import sys
import time

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

port, key, secret, want, queue_url = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
pids = [int(p) for p in sys.argv[6].split(",") if p]
host = "127.0.0.1:%d" % port
out = {}

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if hard != resource.RLIM_INFINITY and soft < hard:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
n = want if limit == resource.RLIM_INFINITY else min(want, limit - 100)
out["fd_limit"] = limit
out["connections"] = n


def signed(target, body):
    headers = {"Host": host, "Content-Type": "application/x-amz-json-1.0",
               "X-Amz-Target": "AmazonSQS." + target}
    req = AWSRequest(method="POST", url="http://%s/" % host, data=body, headers=headers)
    SigV4Auth(Credentials(key, secret), "sqs", "us-east-1").add_auth(req)
    head = "POST / HTTP/1.1\r\n" + "".join("%s: %s\r\n" % kv for kv in req.headers.items()) + \
        "Content-Length: %d\r\n\r\n" % len(body)
    return head.encode() + body


def read_status(s, timeout=10):
    s.settimeout(timeout)
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    line = buf.split(b"\r\n", 1)[0]
    return int(line.split()[1]) if line.startswith(b"HTTP/1.1 ") else 0


def timed_request():
    t = time.monotonic()
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(signed("ListQueues", b"{}"))
        status = read_status(s)
    finally:
        s.close()
    return status, time.monotonic() - t


def worker_sockets():
    total = 0
    for p in pids:
        try:
            for fd in os.listdir("/proc/%d/fd" % p):
                try:
                    if os.readlink("/proc/%d/fd/%s" % (p, fd)).startswith("socket:"):
                        total += 1
                except OSError:
                    pass
        except OSError:
            pass
    return total


def pss_kb():
    res = {}
    for p in pids:
        try:
            with open("/proc/%d/smaps_rollup" % p) as f:
                for line in f:
                    if line.startswith("Pss:"):
                        res[str(p)] = int(line.split()[1])
        except OSError:
            res[str(p)] = None
    return res


out["pss_kb_before"] = pss_kb()
sockets_before = worker_sockets()

# Open them all.
partial_head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Ty"
# (it names a key: the body of a request that names none is never read)
partial_body = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-amz-json-1.0\r\n" \
    b"Authorization: AWS4-HMAC-SHA256 Credential=AKIDHALFBODY/20260101/us-east-1/sqs/aws4_request, " \
    b"SignedHeaders=host, Signature=00\r\n" \
    b"X-Amz-Target: AmazonSQS.ListQueues\r\nContent-Length: 100\r\n\r\n{\"Qu"
held = []
t0 = time.monotonic()
failed = 0
for i in range(n):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
    except OSError as e:
        failed += 1
        out.setdefault("connect_error", str(e))
        continue
    if i % 3 == 0:
        s.sendall(partial_head)
    elif i % 3 == 1:
        s.sendall(partial_body)
    held.append(s)
out["open_seconds"] = round(time.monotonic() - t0, 2)
out["connect_failed"] = failed

# Until the workers hold them all (they accept asynchronously).
t1 = time.monotonic()
while time.monotonic() - t1 < 60:
    out["worker_sockets"] = worker_sockets() - sockets_before
    if out["worker_sockets"] >= len(held):
        break
    time.sleep(0.2)
out["accepted_seconds"] = round(time.monotonic() - t0, 2)

# Requests on new connections while they are open.
lat = []
statuses = []
for _ in range(20):
    st, dt = timed_request()
    statuses.append(st)
    lat.append(dt)
out["statuses"] = sorted(set(statuses))
out["latency_max"] = round(max(lat), 3)
out["latency_median"] = round(sorted(lat)[len(lat) // 2], 3)
out["pss_kb_open"] = pss_kb()

# A slow client: one byte per 100 ms for 3 s; others are served meanwhile.
slow = socket.create_connection(("127.0.0.1", port), timeout=30)
req = signed("ListQueues", b"{}")
lat_slow = []
sent = 0
t2 = time.monotonic()
next_byte = t2
while time.monotonic() - t2 < 3.0:
    if time.monotonic() >= next_byte:
        slow.sendall(req[sent:sent + 1])
        sent += 1
        next_byte += 0.1
    st, dt = timed_request()
    statuses.append(st)
    lat_slow.append(dt)
    time.sleep(0.02)
slow.sendall(req[sent:])
out["slow_bytes_dribbled"] = sent
out["slow_status"] = read_status(slow)
slow.close()
out["statuses"] = sorted(set(statuses))
out["latency_during_slow_max"] = round(max(lat_slow), 3)
out["requests_during_slow"] = len(lat_slow)

# A long poll whose client leaves after 0.5 s.
lp = socket.create_connection(("127.0.0.1", port), timeout=30)
lp.sendall(signed("ReceiveMessage", json.dumps({"QueueUrl": queue_url, "WaitTimeSeconds": 20,
                                                "VisibilityTimeout": 600}).encode()))
time.sleep(0.5)
lp.settimeout(0)
try:
    early = lp.recv(100)
except BlockingIOError:
    early = b""
out["long_poll_answered_early"] = early.decode("latin-1")
lp.close()
out["long_poll_closed"] = True

for s in held:
    s.close()
print(json.dumps(out), flush=True)
