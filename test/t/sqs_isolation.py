#!/usr/bin/env python3
"""sqs_isolation.py: the hostile tenant against a bystander, on the wire
(for test/t/032_sqs_isolation.pl).

    python3 sqs_isolation.py PORT KEY SECRET HKEY HSECRET PHASE [ARGS...]

KEY/SECRET are the bystander's key, HKEY/HSECRET the hostile role's.  Each
phase prints one JSON object on stdout:

    bystander SECS QUEUE
        the bystander alone: ListQueues, SendMessage, ReceiveMessage and
        DeleteMessage on QUEUE, one after another for SECS seconds, each on
        a new connection; every latency in ms (lat), their max, and the
        statuses that were not 200 (bad)
    locked SECS QUEUE HQUEUE N
        N hostile SendMessage requests to the FIFO queue HQUEUE at once
        (each on its own connection, in threads) while the bystander runs
        as above; the hostile answers' statuses and times too
    flood N SECS QUEUE MODE PIDS
        N connections that declare a 4 MiB body and send all of it but one
        byte (MODE "unsigned": no Authorization header; "claimed": a
        forged Authorization header), held open while the bystander runs;
        what the server answered each (status, or "none" while it read),
        and the private memory (kB) of the workers PIDS (comma-separated)
        before and while the connections are held
    presigned QUEUE
        a GET URL presigned for ListQueues (UNSIGNED-PAYLOAD, host signed):
        plain (ok), replayed (GET, as signed) with an unsigned X-Amz-Target
        and a JSON body naming PurgeQueue, with a form body naming
        PurgeQueue, with an unsigned X-Amz-Target and no body; each status
        and code
    storm SECS QUEUE HQUEUE NSEND NFLOOD
        all at once: NSEND hostile sends to HQUEUE (locked), NFLOOD unsigned
        4 MiB bodies, and the bystander for SECS seconds
    start_move SOURCE_ARN DEST_ARN
        the hostile role's StartMessageMoveTask: its status and time
"""
import http.client
import json
import socket
import sys
import threading
import time
import urllib.parse

from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

port, key, secret, hkey, hsecret, phase = sys.argv[1:7]
args = sys.argv[7:]
host = "127.0.0.1:%s" % port
region = "us-east-1"
account = "123456789012"


def call(creds, action, inp, timeout=30):
    """One signed AWS JSON 1.0 request on a new connection."""
    body = json.dumps(inp).encode()
    headers = {"Host": host, "Content-Type": "application/x-amz-json-1.0",
               "X-Amz-Target": "AmazonSQS." + action}
    aws = AWSRequest(method="POST", url="http://%s/" % host, data=body,
                     headers=headers)
    SigV4Auth(Credentials(*creds), "sqs", region).add_auth(aws)
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=timeout)
    try:
        conn.request("POST", "/", body=body, headers=dict(aws.headers.items()))
        r = conn.getresponse()
        data = r.read()
        status = r.status
    except (OSError, http.client.HTTPException) as e:
        data, status = str(e).encode(), 0
    finally:
        conn.close()
    ms = (time.monotonic() - t0) * 1000
    try:
        doc = json.loads(data) if data else {}
    except ValueError:
        doc = {}
    return status, ms, doc


def queue_url(name):
    return "http://%s/%s/%s" % (host, account, name)


def bystander(secs, queue, out):
    creds = (key, secret)
    lat, bad = [], []
    end = time.monotonic() + secs
    n = 0
    while time.monotonic() < end:
        n += 1
        for action, inp in (
                ("ListQueues", {}),
                ("SendMessage", {"QueueUrl": queue_url(queue),
                                 "MessageBody": "b%d" % n}),
                ("ReceiveMessage", {"QueueUrl": queue_url(queue),
                                    "MaxNumberOfMessages": 1})):
            status, ms, doc = call(creds, action, inp)
            lat.append(round(ms, 1))
            if status != 200:
                bad.append([action, status, doc.get("__type")])
            if action == "ReceiveMessage" and status == 200:
                for m in doc.get("Messages", []):
                    status, ms, doc = call(creds, "DeleteMessage", {
                        "QueueUrl": queue_url(queue),
                        "ReceiptHandle": m["ReceiptHandle"]})
                    lat.append(round(ms, 1))
                    if status != 200:
                        bad.append(["DeleteMessage", status, doc.get("__type")])
    out["lat_max"] = max(lat) if lat else None
    out["lat_p50"] = sorted(lat)[len(lat) // 2] if lat else None
    out["requests"] = len(lat)
    out["bad"] = bad


def private_kb(pids):
    total = 0
    for pid in pids:
        try:
            with open("/proc/%s/smaps_rollup" % pid) as f:
                for line in f:
                    if line.startswith(("Private_Clean:", "Private_Dirty:")):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def flood_conn(mode, size, results, i, stop):
    s = socket.create_connection(("127.0.0.1", int(port)))
    s.settimeout(0.5)
    hdr = ("POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-amz-json-1.0\r\n"
           "X-Amz-Target: AmazonSQS.ListQueues\r\nContent-Length: %d\r\n" % (host, size))
    if mode == "claimed":
        hdr += ("Authorization: AWS4-HMAC-SHA256 Credential=%s/20260101/us-east-1/sqs/"
                "aws4_request, SignedHeaders=host, Signature=%s\r\n" % (hkey, "0" * 64))
    s.sendall((hdr + "\r\n").encode())
    chunk = b"x" * 65536
    left = size - 1
    answer = b""
    try:
        while left > 0 and not stop.is_set():
            try:
                sent = s.send(chunk[:min(len(chunk), left)])
                left -= sent
            except socket.timeout:
                pass
            try:
                got = s.recv(4096, socket.MSG_DONTWAIT)
                if got:
                    answer += got
                    break
                break
            except (BlockingIOError, socket.timeout):
                pass
    except OSError:
        pass
    if not answer:
        try:
            s.settimeout(0.2)
            answer = s.recv(4096)
        except OSError:
            pass
    line = answer.split(b"\r\n", 1)[0].decode("latin-1")
    results[i] = {"status": line.split(" ")[1] if line.startswith("HTTP/") else "none",
                  "sent": size - 1 - left}
    stop.wait()
    s.close()


def hostile_send(hqueue, tag, answers, i):
    """One hostile SendMessage to the FIFO queue hqueue: [status, ms, type]."""
    status, ms, doc = call((hkey, hsecret), "SendMessage", {
        "QueueUrl": queue_url(hqueue), "MessageBody": "%s%d" % (tag, i),
        "MessageGroupId": "g", "MessageDeduplicationId": "%s%d" % (tag, i)},
        timeout=60)
    answers[i] = [status, round(ms), doc.get("__type")]


def main():
    out = {"phase": phase}
    if phase == "bystander":
        bystander(float(args[0]), args[1], out)
    elif phase == "locked":
        secs, queue, hqueue, n = float(args[0]), args[1], args[2], int(args[3])
        hostile = [None] * n
        ts = [threading.Thread(target=hostile_send, args=(hqueue, "h", hostile, i))
              for i in range(n)]
        for t in ts:
            t.start()
        time.sleep(0.2)
        bystander(secs, queue, out)
        for t in ts:
            t.join()
        out["hostile"] = hostile
    elif phase == "flood":
        n, secs, queue, mode = int(args[0]), float(args[1]), args[2], args[3]
        pids = args[4].split(",")
        out["mem_before_kb"] = private_kb(pids)
        results = [None] * n
        stop = threading.Event()
        ts = [threading.Thread(target=flood_conn,
                               args=(mode, 4 * 1024 * 1024, results, i, stop))
              for i in range(n)]
        for t in ts:
            t.start()
        deadline = time.monotonic() + 60
        while any(r is None for r in results) and time.monotonic() < deadline:
            time.sleep(0.1)
        out["mem_during_kb"] = private_kb(pids)
        bystander(secs, queue, out)
        out["mem_after_bystander_kb"] = private_kb(pids)
        stop.set()
        for t in ts:
            t.join()
        counts = {}
        for r in results:
            k = r["status"] if r else "lost"
            counts[k] = counts.get(k, 0) + 1
        out["answers"] = counts
        out["sent_max"] = max((r["sent"] for r in results if r), default=0)
    elif phase == "storm":
        secs, queue, hqueue, nsend, nflood = float(args[0]), args[1], args[2], int(args[3]), int(args[4])
        hostile = [None] * nsend
        results = [None] * nflood
        stop = threading.Event()
        ts = [threading.Thread(target=hostile_send, args=(hqueue, "s", hostile, i))
              for i in range(nsend)]
        fs = [threading.Thread(target=flood_conn,
                               args=("unsigned", 4 * 1024 * 1024, results, i, stop))
              for i in range(nflood)]
        for t in ts + fs:
            t.start()
        time.sleep(0.2)
        bystander(secs, queue, out)
        stop.set()
        for t in ts + fs:
            t.join()
        out["hostile"] = hostile
        counts = {}
        for r in results:
            k = r["status"] if r else "lost"
            counts[k] = counts.get(k, 0) + 1
        out["answers"] = counts
    elif phase == "presigned":
        queue = args[0]
        creds = Credentials(hkey, hsecret)
        req = AWSRequest(method="GET",
                         url="http://%s/?Action=ListQueues&Version=2012-11-05" % host,
                         headers={"Host": host})
        SigV4QueryAuth(creds, "sqs", region, expires=3600).add_auth(req)
        url = req.url
        path = url[len("http://%s" % host):]
        tries = {
            "plain": ("GET", {}, None),
            "target_json_body": ("GET", {
                "X-Amz-Target": "AmazonSQS.PurgeQueue",
                "Content-Type": "application/x-amz-json-1.0"},
                json.dumps({"QueueUrl": queue_url(queue)})),
            "form_body": ("GET", {
                "Content-Type": "application/x-www-form-urlencoded"},
                urllib.parse.urlencode({"Action": "PurgeQueue",
                                        "QueueUrl": queue_url(queue)})),
            "target_no_body": ("GET", {"X-Amz-Target": "AmazonSQS.ListQueues",
                                       "Content-Type": "application/x-amz-json-1.0"},
                               None),
        }
        for name, (method, headers, body) in tries.items():
            conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
            h = {"Host": host}
            h.update(headers)
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            data = r.read().decode("utf-8", "replace")
            code = r.getheader("x-amzn-query-error") or ""
            if not code and "<Code>" in data:
                code = data.split("<Code>", 1)[1].split("<", 1)[0]
            out[name] = {"status": r.status, "code": code.split(";")[0]}
            conn.close()
    elif phase == "start_move":
        inp = {"SourceArn": args[0]}
        if len(args) > 1 and args[1]:
            inp["DestinationArn"] = args[1]
        status, ms, doc = call((hkey, hsecret), "StartMessageMoveTask", inp, timeout=120)
        out.update({"status": status, "ms": round(ms, 1), "doc": doc})
    else:
        raise SystemExit("unknown phase " + phase)
    print(json.dumps(out), flush=True)


main()
