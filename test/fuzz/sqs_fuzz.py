#!/usr/bin/python3
"""sqs_fuzz.py: random requests against the SQS endpoint (src/sqs/), run
by test/fuzz/sqs_run.sh on a throwaway cluster (`make fuzz`, and a short
run in `make test`).  Debian's /usr/bin/python3 -I (its botocore signs).

Each iteration is one of: a signed request of an SQS action in AWS JSON
1.0 or in Query (POST form or GET, some presigned) whose parameters are
drawn from good, extreme and malformed values (huge and negative numbers,
unicode, NUL bytes, long strings, wrong types, deeply nested JSON,
duplicate keys, random flattening indexes, thousands of parameters); a
signed request with a garbage body; an unsigned or badly signed one; raw
malformed HTTP over a socket (bad request lines and headers, huge
headers, chunked oddities, garbage); several requests pipelined on one
connection; a request sent slowly byte by byte, or half sent and closed,
or half sent and left open; a body over the cap; a long poll whose client
leaves before a message comes; an unsigned request declaring a large body
(refused 403 at its headers); a URL presigned for ListQueues replayed with
an unsigned body or X-Amz-Target (never served); a send to a queue whose
lock a SQL session holds for a while (200 or ServiceUnavailable, and a
ListQueues meanwhile answered in under 1 s).

Checked after each: every answer is well-formed HTTP/1.1; an API answer's
status is 200, 400, 403, 404 or 413 (503 only as ServiceUnavailable;
500 InternalError is a failure); a JSON answer parses and an error one
has __type and x-amzn-query-error; an XML answer parses; a signed ListQueues
on a new connection is answered 200; the endpoint's workers have the pids
they had (no crash, no restart).  Every 50 iterations and at the end the
server log has no PANIC, TRAP or backend killed by a signal.  At the end:
every receipt handle the fuzz got is deleted, and then no queue has a
message in flight (no message leased to nobody), and the long-poll queue
got, after each client left, a message that is visible and was never
received.  Tolerated: libmicrohttpd's own HTML 414/431 to a request line
or headers over its connection memory; no answer within 1.5 s to raw
bytes the server may still be waiting the rest of (a chunk of 2^64
bytes), the health request after it showing the server serves; the
server closing while a request over 32 KiB is still being sent (413).

Environment: SQS_PORT, SQS_KEY/SQS_SECRET (role fz_app), SQS_ADMIN_KEY/
SQS_ADMIN_SECRET (a superuser), SQS_ACCOUNT, PM_PID (the postmaster),
SERVER_LOG, PSQL (+ PGHOST, PGPORT, PGUSER, PGDATABASE), FUZZ_ITERATIONS
(default 1000), FUZZ_SEED, FUZZ_VERBOSE=1, FUZZ_DUMP=file (the failing
request's bytes).  Exit status 0 only if nothing
was violated; a violation prints the request that caused it.
"""
import datetime
import json
import os
import random
import re
import socket
import subprocess
import sys
import time
import urllib.parse
import xml.etree.ElementTree as ET

from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

PORT = int(os.environ["SQS_PORT"])
HOST = "127.0.0.1:%d" % PORT
KEY, SECRET = os.environ["SQS_KEY"], os.environ["SQS_SECRET"]
ADMIN_KEY, ADMIN_SECRET = os.environ["SQS_ADMIN_KEY"], os.environ["SQS_ADMIN_SECRET"]
ACCOUNT = os.environ.get("SQS_ACCOUNT", "000000000000")
PM_PID = int(os.environ["PM_PID"])
SERVER_LOG = os.environ["SERVER_LOG"]
PSQL = os.environ.get("PSQL", "psql")
ITERATIONS = int(os.environ.get("FUZZ_ITERATIONS", "1000"))
SEED = int(os.environ.get("FUZZ_SEED") or random.SystemRandom().randrange(1 << 31))
VERBOSE = os.environ.get("FUZZ_VERBOSE") == "1"
TIMEOUT = 30.0
REGION = "us-east-1"

rng = random.Random(SEED)
BASE = "http://%s/%s/" % (HOST, ACCOUNT)
BASE_QUEUES = ["fz_std", "fz_fifo.fifo", "fz_small", "fz_dlq", "fz_src"]
LP_QUEUE = "fz_lp"              # long polls that are dropped: nothing else reads it
API_STATUSES = {200, 400, 403, 404, 413}
# What libmicrohttpd itself may answer to broken HTTP
RAW_STATUSES = API_STATUSES | {414, 431, 501, 505, 417}


class Violation(Exception):
    pass


# ------------------------------------------------------------------ values

def long_str(n, ch="a"):
    return ch * n


def rnd_text():
    return rng.choice([
        "", "x", "hello world", "é漢字😀", "\x00", "a\x00b", "\r\n", "<&>\"'",
        "]]>", "%00", "%zz", "\\u0000", "\ud800", "\udfff\ud800", " ", "\t",
        long_str(rng.choice([256, 1025, 4097, 70000])),
        long_str(rng.choice([300, 5000]), "é"),
        "".join(chr(rng.randrange(1, 0x2FFFF)) for _ in range(rng.randrange(1, 40))),
        "fz_std", "fz_fifo.fifo", "nosuch", "..", "/", "a" * 81,
    ])


def rnd_number():
    return rng.choice([
        0, 1, -1, 2, 10, 11, 20, 21, 43200, 43201, 900, 901, 1209600, 262144,
        2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 63 - 1, 2 ** 63, 2 ** 64, -2 ** 63 - 1,
        10 ** 30, 1.5, -0.0, 1e308, 1e-308,
        "0", "1", "-1", "1e400", "NaN", "Infinity", "0x10", " 5", "5 ", "",
        "99999999999999999999999999", "1.0", "true", "١٢", True, False, None,
        [], {}, [1], {"a": 1},
    ])


def rnd_bool():
    return rng.choice([True, False, "true", "false", "TRUE", "1", "0", "", "yes", 1, None, []])


def rnd_any():
    return rng.choice([rnd_text, rnd_number, rnd_bool, lambda: [rnd_text()],
                       lambda: {rnd_text(): rnd_text()}])()


def good_or(good, bad=None, p_good=0.6):
    """good (a value or a function) most of the time, else a bad value."""
    if rng.random() < p_good:
        return good() if callable(good) else good
    return (bad or rnd_any)()


def queue_url():
    name = rng.choice(BASE_QUEUES + ["nosuch", "fzq_%d" % rng.randrange(6)])
    return rng.choice([
        lambda: BASE + name,
        lambda: BASE + name,
        lambda: BASE + name,
        lambda: name,
        lambda: "arn:aws:sqs:%s:%s:%s" % (REGION, ACCOUNT, name),
        lambda: "http://other.example/999999999999/" + name,
        lambda: BASE + name + "/extra",
        lambda: BASE + "../" + name,
        lambda: BASE,
        lambda: "",
        rnd_text,
        rnd_any,
    ])()


def wait_seconds():
    # valid waits stay short: the fuzz should not sleep
    return rng.choice([0, 0, 0, 1, -1, 21, 20.5, 2 ** 40, "x", None, "0", "1"])


def attr_map(writable_only=True):
    names = ["DelaySeconds", "MaximumMessageSize", "MessageRetentionPeriod",
             "ReceiveMessageWaitTimeSeconds", "VisibilityTimeout", "RedrivePolicy",
             "RedriveAllowPolicy", "FifoQueue", "ContentBasedDeduplication",
             "DeduplicationScope", "FifoThroughputLimit", "Policy", "KmsMasterKeyId",
             "SqsManagedSseEnabled", "QueueArn", "All", "Nope", ""]
    out = {}
    for _ in range(rng.randrange(0, 5)):
        n = rng.choice(names) if rng.random() < 0.9 else rnd_text()
        if n == "RedrivePolicy":
            v = rng.choice([
                json.dumps({"deadLetterTargetArn": "arn:aws:sqs:%s:%s:fz_dlq" % (REGION, ACCOUNT),
                            "maxReceiveCount": rnd_number()}),
                json.dumps({"deadLetterTargetArn": rnd_text(), "maxReceiveCount": "3"}),
                "{", "[]", "null", rnd_text()])
        elif n == "RedriveAllowPolicy":
            v = rng.choice([json.dumps({"redrivePermission": rng.choice(["allowAll", "denyAll", "byQueue", "x"]),
                                        "sourceQueueArns": [rnd_text()]}), "{}", rnd_text()])
        elif n == "ReceiveMessageWaitTimeSeconds":
            v = rng.choice(["0", "-1", "21", "x", ""])     # never a real wait
        else:
            v = rng.choice([str(rnd_number()), rnd_text(), rnd_number()])
        out[n] = v
    return out


def msg_attrs():
    out = {}
    for _ in range(rng.randrange(0, 12)):
        t = rng.choice(["String", "Number", "Binary", "String.x", "Number.int", "Bogus", "", rnd_text()])
        v = {"DataType": t}
        r = rng.random()
        if r < 0.4:
            v["StringValue"] = rng.choice([rnd_text(), str(rnd_number())])
        elif r < 0.7:
            v["BinaryValue"] = rng.choice(["AAEC", "!!!", "", "QUJD" * 100, rnd_text()])
        elif r < 0.8:
            v["StringValue"] = "1"
            v["BinaryValue"] = "AA=="
        elif r < 0.9:
            v = rnd_any()
        out[rng.choice(["a", "b", "a.b", ".a", "a..b", "AWS.x", "amazon.y", "",
                        "x" * 257, rnd_text()])] = v
    return out


def handle():
    if HANDLES and rng.random() < 0.5:
        return rng.choice(HANDLES)[1]
    return rng.choice(["", "x", "AQEB" + "A" * 200, rnd_text(), "0" * 1024,
                       "\x00" * 10, "..", "%2F", "a" * 10000])


def entries(make):
    n = rng.choice([0, 1, 2, 3, 10, 11, 1000])
    out = [make(i) for i in range(n)]
    if out and rng.random() < 0.2:
        out.append(dict(out[0]))   # duplicate Id
    return out


def entry_id(i):
    return good_or(lambda: "e%d" % i, lambda: rng.choice(["", "a b", "x" * 81, rnd_text()]), 0.8)


def gen_input(action):
    """An action's input shape: mostly right structure, random values."""
    q = lambda: good_or(queue_url, p_good=0.8)
    body = lambda: good_or(lambda: rng.choice(["hello", "é漢字😀", "x" * 100]),
                           lambda: rng.choice(["", "\x00", "\ufffe", "\x01\x02", "x" * 262145,
                                               "x" * 262144, rnd_text()]), 0.6)
    i = {}
    if action == "CreateQueue":
        i["QueueName"] = good_or(lambda: rng.choice(["fzq_%d" % rng.randrange(6), "fzq_%d.fifo" % rng.randrange(3)]),
                                 p_good=0.7)
        if rng.random() < 0.6:
            i["Attributes"] = attr_map()
        if rng.random() < 0.3:
            i["tags"] = {rnd_text(): rnd_text() for _ in range(rng.choice([0, 1, 2, 51]))}
    elif action in ("DeleteQueue", "PurgeQueue"):
        # never the fuzz's base queues: only its own or nonexistent ones
        i["QueueUrl"] = good_or(lambda: BASE + "fzq_%d" % rng.randrange(6),
                                lambda: rng.choice([BASE + "nosuch", "", rnd_text()]), 0.5)
    elif action == "GetQueueUrl":
        i["QueueName"] = good_or(lambda: rng.choice(BASE_QUEUES), p_good=0.6)
        if rng.random() < 0.2:
            i["QueueOwnerAWSAccountId"] = rng.choice([ACCOUNT, "1", rnd_text()])
    elif action == "ListQueues":
        if rng.random() < 0.5:
            i["QueueNamePrefix"] = good_or("fz", p_good=0.5)
        if rng.random() < 0.5:
            i["MaxResults"] = good_or(lambda: rng.randrange(1, 1001), rnd_number, 0.5)
        if rng.random() < 0.3:
            i["NextToken"] = rng.choice(["", "x", "AAAA", rnd_text(), "fz_std"])
    elif action == "GetQueueAttributes":
        i["QueueUrl"] = q()
        if rng.random() < 0.8:
            i["AttributeNames"] = good_or(lambda: rng.sample(["All", "QueueArn", "VisibilityTimeout",
                                                              "ApproximateNumberOfMessages", "Nope",
                                                              "RedrivePolicy", "Policy"], rng.randrange(1, 4)),
                                          p_good=0.7)
    elif action == "SetQueueAttributes":
        # not on the base queues: a ReceiveMessageWaitTimeSeconds there would slow the fuzz
        i["QueueUrl"] = good_or(lambda: BASE + "fzq_%d" % rng.randrange(6),
                                lambda: rng.choice([BASE + "nosuch", "", rnd_text()]), 0.6)
        i["Attributes"] = good_or(attr_map, p_good=0.9)
    elif action == "TagQueue":
        i["QueueUrl"] = q()
        i["Tags"] = good_or(lambda: {rnd_text(): rnd_text() for _ in range(rng.choice([0, 1, 3, 60]))}, p_good=0.8)
    elif action == "UntagQueue":
        i["QueueUrl"] = q()
        i["TagKeys"] = good_or(lambda: [rnd_text() for _ in range(rng.choice([0, 1, 3]))], p_good=0.8)
    elif action in ("ListQueueTags", "ListDeadLetterSourceQueues"):
        i["QueueUrl"] = q()
        if action == "ListDeadLetterSourceQueues" and rng.random() < 0.4:
            i["MaxResults"] = rnd_number()
            i["NextToken"] = rnd_text()
    elif action == "SendMessage":
        i["QueueUrl"] = q()
        i["MessageBody"] = body()
        if rng.random() < 0.3:
            i["DelaySeconds"] = good_or(lambda: rng.choice([0, 1]), rnd_number, 0.3)
        if rng.random() < 0.4:
            i["MessageAttributes"] = msg_attrs()
        if rng.random() < 0.2:
            i["MessageSystemAttributes"] = {rng.choice(["AWSTraceHeader", "x"]): {"DataType": "String", "StringValue": rnd_text()}}
        if rng.random() < 0.4:
            i["MessageGroupId"] = good_or("g", rnd_text, 0.5)
        if rng.random() < 0.4:
            i["MessageDeduplicationId"] = good_or(lambda: "d%d" % rng.randrange(100), rnd_text, 0.5)
    elif action == "SendMessageBatch":
        i["QueueUrl"] = q()
        i["Entries"] = good_or(lambda: entries(lambda n: {
            "Id": entry_id(n), "MessageBody": body(),
            **({"DelaySeconds": rnd_number()} if rng.random() < 0.2 else {}),
            **({"MessageAttributes": msg_attrs()} if rng.random() < 0.2 else {}),
            **({"MessageGroupId": good_or("g", rnd_text)} if rng.random() < 0.4 else {}),
            **({"MessageDeduplicationId": rnd_text()} if rng.random() < 0.2 else {}),
        }), p_good=0.85)
    elif action == "ReceiveMessage":
        # never on the long-poll queue: what is received there must be nobody's
        i["QueueUrl"] = good_or(lambda: BASE + rng.choice(BASE_QUEUES), queue_url, 0.8)
        i["WaitTimeSeconds"] = wait_seconds()
        if rng.random() < 0.6:
            i["MaxNumberOfMessages"] = good_or(lambda: rng.randrange(1, 11), rnd_number, 0.6)
        if rng.random() < 0.5:
            i["VisibilityTimeout"] = good_or(lambda: rng.choice([0, 1, 30]), rnd_number, 0.6)
        if rng.random() < 0.4:
            i["AttributeNames"] = good_or(lambda: ["All"], lambda: [rnd_text()], 0.5)
        if rng.random() < 0.3:
            i["MessageAttributeNames"] = good_or(lambda: ["All"], lambda: [rnd_text(), ".*", "a.*"], 0.5)
        if rng.random() < 0.2:
            i["ReceiveRequestAttemptId"] = rnd_text()
    elif action == "DeleteMessage":
        i["QueueUrl"] = q()
        i["ReceiptHandle"] = handle()
    elif action == "DeleteMessageBatch":
        i["QueueUrl"] = q()
        i["Entries"] = good_or(lambda: entries(lambda n: {"Id": entry_id(n), "ReceiptHandle": handle()}), p_good=0.85)
    elif action == "ChangeMessageVisibility":
        i["QueueUrl"] = q()
        i["ReceiptHandle"] = handle()
        i["VisibilityTimeout"] = good_or(lambda: rng.choice([0, 0, 5]), rnd_number, 0.5)
    elif action == "ChangeMessageVisibilityBatch":
        i["QueueUrl"] = q()
        i["Entries"] = good_or(lambda: entries(lambda n: {"Id": entry_id(n), "ReceiptHandle": handle(),
                                                          "VisibilityTimeout": good_or(0, rnd_number, 0.5)}), p_good=0.85)
    elif action == "StartMessageMoveTask":
        i["SourceArn"] = good_or(lambda: "arn:aws:sqs:%s:%s:%s" % (REGION, ACCOUNT, rng.choice(["fz_dlq", "nosuch", "fz_std"])),
                                 p_good=0.7)
        if rng.random() < 0.5:
            i["DestinationArn"] = good_or(lambda: "arn:aws:sqs:%s:%s:fz_src" % (REGION, ACCOUNT), p_good=0.6)
        if rng.random() < 0.5:
            i["MaxNumberOfMessagesPerSecond"] = rnd_number()
    elif action == "ListMessageMoveTasks":
        i["SourceArn"] = good_or(lambda: "arn:aws:sqs:%s:%s:fz_dlq" % (REGION, ACCOUNT), p_good=0.7)
        if rng.random() < 0.5:
            i["MaxResults"] = rnd_number()
    elif action == "CancelMessageMoveTask":
        i["TaskHandle"] = rng.choice(["", "x", "eyJ9", rnd_text(), "a" * 5000])
    elif action in ("AddPermission", "RemovePermission"):
        i["QueueUrl"] = q()
        i["Label"] = rnd_text()
    # structural mischief on the whole input
    r = rng.random()
    if r < 0.05:
        k = rng.choice(list(i) or ["X"])
        i[k] = rnd_any()
    elif r < 0.08:
        i[rnd_text()] = rnd_any()
    elif r < 0.10 and i:
        del i[rng.choice(list(i))]
    return i


ACTIONS = ["CreateQueue", "DeleteQueue", "GetQueueUrl", "ListQueues", "GetQueueAttributes",
           "SetQueueAttributes", "PurgeQueue", "TagQueue", "UntagQueue", "ListQueueTags",
           "SendMessage", "SendMessageBatch", "ReceiveMessage", "DeleteMessage",
           "DeleteMessageBatch", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch",
           "ListDeadLetterSourceQueues", "StartMessageMoveTask", "ListMessageMoveTasks",
           "CancelMessageMoveTask", "AddPermission", "RemovePermission"]
WEIGHTS = {"SendMessage": 6, "ReceiveMessage": 6, "SendMessageBatch": 3, "DeleteMessage": 3,
           "DeleteMessageBatch": 2, "ChangeMessageVisibility": 2, "ChangeMessageVisibilityBatch": 2}

# ------------------------------------------------------------- encodings

def deep_json(depth):
    return "[" * depth + "]" * depth if rng.random() < 0.5 else '{"a":' * depth + "1" + "}" * depth


def json_body(inp):
    r = rng.random()
    if r < 0.75:
        return json.dumps(inp, ensure_ascii=rng.random() < 0.5, allow_nan=True).encode("utf-8", "surrogatepass")
    if r < 0.82:   # duplicate keys
        s = json.dumps(inp, allow_nan=True)
        if len(s) > 2 and inp:
            k = rng.choice(list(inp))
            s = s[:-1] + ", " + json.dumps(k) + ": " + json.dumps(rnd_any(), allow_nan=True) + "}"
        return s.encode("utf-8", "surrogatepass")
    if r < 0.88:   # deeply nested somewhere
        s = json.dumps(inp)
        inner = deep_json(rng.choice([10, 100, 1000, 10000, 100000]))
        return ('{"QueueUrl": %s, "X": %s}' % (json.dumps(BASE + "fz_std"), inner) if rng.random() < 0.5 else
                s[:-1] + (", " if len(s) > 2 else "") + '"Nest": ' + inner + "}").encode()
    if r < 0.94:   # truncated / damaged
        s = json.dumps(inp).encode()
        cut = rng.randrange(0, len(s) + 1)
        return s[:cut] + rng.choice([b"", b"\x00", b"\xff\xfe", b"}", b"]]]", b'"'])
    return rng.choice([b"", b"null", b"[]", b"1", b'"x"', b"{", b"{}{}", b"\xef\xbb\xbf{}",
                       b'{"QueueUrl": "\\ud800"}', b'{"a": 1e999999}', b'{"a": -}', b"{\x00}",
                       ("{" + ",".join('"k%d": %d' % (n, n) for n in range(50000)) + "}").encode()])


def flatten_query(action, inp, mutate=False, many=True):
    """Query parameters of an input, flattened the SQS model's way."""
    out = []

    def member_prefix(prefix, i):
        return "%s.%d" % (prefix, i)

    def walk(prefix, v):
        if isinstance(v, dict):
            if prefix in ("Attribute", "Tag", "MessageAttribute", "MessageSystemAttribute") or prefix.endswith(
                    ".MessageAttribute") or prefix.endswith(".MessageSystemAttribute"):
                kname, vname = ("Key", "Value") if prefix == "Tag" else ("Name", "Value")
                for n, (k, val) in enumerate(v.items(), 1):
                    out.append(("%s.%d.%s" % (prefix, n, kname), k))
                    walk("%s.%d.%s" % (prefix, n, vname), val)
            else:
                for k, val in v.items():
                    walk("%s.%s" % (prefix, k) if prefix else k, val)
        elif isinstance(v, list):
            for n, val in enumerate(v, 1):
                walk(member_prefix(prefix, n), val)
        elif isinstance(v, bool):
            out.append((prefix, "true" if v else "false"))
        elif v is None:
            out.append((prefix, ""))
        else:
            out.append((prefix, str(v)))

    names = {"Attributes": "Attribute", "Tags": "Tag", "tags": "Tag", "MessageAttributes": "MessageAttribute",
             "MessageSystemAttributes": "MessageSystemAttribute", "AttributeNames": "AttributeName",
             "MessageAttributeNames": "MessageAttributeName", "TagKeys": "TagKey",
             "Entries": {"SendMessageBatch": "SendMessageBatchRequestEntry",
                         "DeleteMessageBatch": "DeleteMessageBatchRequestEntry",
                         "ChangeMessageVisibilityBatch": "ChangeMessageVisibilityBatchRequestEntry"}.get(action, "Entry")}
    for k, v in inp.items():
        p = names.get(k, k)
        if k == "Entries" and isinstance(v, list):
            for n, e in enumerate(v, 1):
                if isinstance(e, dict):
                    for ek, ev in e.items():
                        walk("%s.%d.%s" % (p, n, names.get(ek, ek) if ek.endswith("Attributes") else ek), ev)
                else:
                    walk("%s.%d" % (p, n), e)
        else:
            walk(p, v)
    if not mutate:
        return out
    # random flattening indexes
    if rng.random() < 0.15:
        idx = lambda: rng.choice(["0", "-1", "99999999999999999999", "a", "", "1.5", "01", " 1", "4294967297"])
        out = [(re.sub(r"\.(\d+)(\.|$)", lambda m: "." + idx() + m.group(2), k) if rng.random() < 0.5 else k, v)
               for k, v in out]
    r = rng.random()
    if r < 0.05 and many:       # thousands of parameters
        out += [("Junk.%d" % n, "v") for n in range(rng.choice([999, 1001, 4096, 5000]))]
    elif r < 0.10:     # duplicates
        out += [rng.choice(out)] if out else [("Action", action)]
    elif r < 0.14:
        out += [(rnd_text(), rnd_text())]
    return out


def enc_component(s):
    if isinstance(s, bytes):
        return urllib.parse.quote_from_bytes(s, safe="-_.~")
    return urllib.parse.quote(s.encode("utf-8", "surrogatepass"), safe="-_.~")


def query_string(params):
    return "&".join(enc_component(k) + "=" + enc_component(v) for k, v in params)


# -------------------------------------------------------------- signing

def sign(method, url, headers, body, key=None, secret=None, presign=False, when=None):
    creds = Credentials(KEY if key is None else key, SECRET if secret is None else secret)
    req = AWSRequest(method=method, url=url, data=body, headers=headers)
    if presign:
        SigV4QueryAuth(creds, "sqs", REGION, expires=rng.choice([60, 3600, 604800])).add_auth(req)
        return req.url, dict(req.headers.items())
    auth = SigV4Auth(creds, "sqs", REGION)
    if when is not None:
        # botocore reads the time itself: sign a request of another time
        orig = datetime.datetime

        class Fixed(datetime.datetime):
            @classmethod
            def utcnow(cls):
                return when
        import botocore.auth as ba
        # newer botocore (1.31 on, Debian sid's) asks get_current_datetime()
        saved_now = getattr(ba, "get_current_datetime", None)
        ba.datetime.datetime = Fixed
        if saved_now is not None:
            ba.get_current_datetime = lambda *args, **kwargs: when
        try:
            auth.add_auth(req)
        finally:
            ba.datetime.datetime = orig
            if saved_now is not None:
                ba.get_current_datetime = saved_now
    else:
        auth.add_auth(req)
    return req.url, dict(req.headers.items())


def build(method, path_query, headers, body):
    lines = ["%s %s HTTP/1.1" % (method, path_query)]
    for k, v in headers.items():
        lines.append("%s: %s" % (k, v))
    if body or method == "POST":
        if not any(k.lower() == "content-length" for k in headers):
            lines.append("Content-Length: %d" % len(body))
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogatepass")
    return head + body


def api_request(action, inp, proto, key=None, secret=None, sign_mode="good", method=None):
    """(bytes, description) of one request of an action."""
    headers = {"Host": HOST}
    key = key or KEY
    secret = secret or SECRET
    path = "/"
    presign = False
    if proto == "json":
        body = json_body(inp)
        headers["Content-Type"] = rng.choice(["application/x-amz-json-1.0"] * 8 + ["application/json", "text/plain", ""])
        headers["X-Amz-Target"] = "AmazonSQS." + action if rng.random() < 0.97 else rng.choice(
            ["AmazonSQS", "AmazonSQS.", "Other." + action, "AmazonSQS." + action + "x", rnd_text()])
        if rng.random() < 0.5:
            headers["x-amzn-query-mode"] = "true"
        method = "POST"
        url = "http://%s/" % HOST
    else:
        method = method or rng.choice(["POST"] * 6 + ["GET"])
        # not thousands of parameters in a GET: libmicrohttpd 0.9.75 parses
        # a query string's arguments into its connection memory, and one
        # over it leaves the request unanswered until the connection's
        # timeout (raw_catalogue has one, where no answer is tolerated)
        params = ([("Action", action), ("Version", "2012-11-05")] if rng.random() < 0.97 else []) + \
            flatten_query(action, inp, True, many=method != "GET")
        qs = query_string(params)
        # nor a long query string: a request line that fits libmicrohttpd's
        # connection memory but leaves too little of it for the headers
        # gets a 431 that 0.9.75 never sends (the same hang); seen by CI
        # with a 31.5 KB GET (seed 333231125).  Such requests go by POST.
        if method == "GET" and len(qs) > 8192:
            method = "POST"
        if method == "GET":
            body = b""
            url = "http://%s/?%s" % (HOST, qs)
            presign = rng.random() < 0.3
        else:
            body = qs.encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded; charset=utf-8"
            url = "http://%s/" % HOST
            if rng.random() < 0.1:
                path = "/%s/fz_std" % ACCOUNT
                url = "http://%s%s" % (HOST, path)
    if sign_mode != "none":
        k, s, when = key, secret, None
        if sign_mode == "secret":
            s = secret + "x"
        elif sign_mode == "key":
            k = rng.choice(["AKIDNOSUCHKEY0000000", "", "a" * 200, "\x01", "ключ"])
        elif sign_mode == "expired":
            when = datetime.datetime.utcnow() - datetime.timedelta(minutes=rng.choice([16, 60 * 24 * 365]))
        elif sign_mode == "future":
            when = datetime.datetime.utcnow() + datetime.timedelta(minutes=20)
        try:
            url, headers = sign(method, url, headers, body, k, s, presign=presign and sign_mode == "good", when=when)
        except Exception:
            pass            # botocore cannot sign it (a non-ASCII header): sent unsigned
        if sign_mode == "mangle":
            a = headers.get("Authorization", "")
            headers["Authorization"] = rng.choice([
                a.replace("Signature=", "Signature=0"), a.replace("AWS4-HMAC-SHA256", "AWS4-HMAC-SHA1"),
                a.split(",")[0], "", "AWS4-HMAC-SHA256", "Bearer x", a + ", Signature=00",
                a.replace("SignedHeaders=", "SignedHeaders=zzz;"), a.replace("/sqs/", "/s3/"),
                a.replace("Credential=", "Credential=" + "a/" * 300), a * 30, "AWS4-HMAC-SHA256 Credential=\x7f"])
            if rng.random() < 0.3:
                headers["X-Amz-Date"] = rng.choice(["", "20200101T000000Z", "garbage", "99999999T999999Z"])
    pq = url[len("http://%s" % HOST):] or "/"
    return build(method, pq, headers, body), "%s %s %s sign=%s body=%r" % (proto, method, action, sign_mode, body[:300])


# -------------------------------------------------------------- the wire

class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None


class Conn:
    def __init__(self):
        self.sock = socket.create_connection(("127.0.0.1", PORT), timeout=TIMEOUT)
        self.buf = b""

    def send(self, data):
        LAST_SENT[0] = data
        self.sock.sendall(data)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def _fill(self, deadline, timeout=TIMEOUT):
        left = deadline - time.monotonic()
        if left <= 0:
            raise Violation("no answer within %.0f s (a hang)" % timeout)
        self.sock.settimeout(left)
        try:
            d = self.sock.recv(65536)
        except socket.timeout:
            raise Violation("no answer within %.0f s (a hang)" % timeout)
        except ConnectionResetError:
            d = b""
        self.buf += d
        return len(d) > 0

    def read_response(self, allow_close=False, timeout=TIMEOUT):
        """One response; None if the server closed before any byte and allow_close."""
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self.buf:
            if not self._fill(deadline, timeout):
                if not self.buf and allow_close:
                    return None
                raise Violation("connection closed in the middle of a response head: %r" % self.buf[:200])
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        m = re.match(rb"^HTTP/1\.[01] (\d{3}) [^\r\n]*$", lines[0])
        if not m:
            raise Violation("malformed status line %r" % lines[0][:200])
        status = int(m.group(1))
        if status == 100 and len(lines) >= 1:
            # an interim answer (Expect: 100-continue): the real one follows
            return self.read_response(allow_close, timeout)
        headers = []
        for ln in lines[1:]:
            if b":" not in ln:
                raise Violation("malformed response header %r" % ln[:200])
            k, v = ln.split(b":", 1)
            headers.append((k.decode("latin-1").strip(), v.decode("latin-1").strip()))
        r = Response(status, headers, b"")
        te = r.header("Transfer-Encoding")
        cl = r.header("Content-Length")
        if te and "chunked" in te.lower():
            body = b""
            while True:
                while b"\r\n" not in self.buf:
                    if not self._fill(deadline, timeout):
                        raise Violation("connection closed in a chunked response")
                size_line, self.buf = self.buf.split(b"\r\n", 1)
                size = int(size_line.split(b";")[0], 16)
                while len(self.buf) < size + 2:
                    if not self._fill(deadline, timeout):
                        raise Violation("connection closed in a chunk")
                body += self.buf[:size]
                self.buf = self.buf[size + 2:]
                if size == 0:
                    break
            r.body = body
        elif cl is not None:
            if not cl.isdigit():
                raise Violation("malformed Content-Length %r" % cl)
            n = int(cl)
            while len(self.buf) < n:
                if not self._fill(deadline, timeout):
                    raise Violation("connection closed before the %d body bytes" % n)
            r.body, self.buf = self.buf[:n], self.buf[n:]
        elif status not in (204, 304) and not (100 <= status < 200):
            # read to close
            while self._fill(deadline, timeout):
                pass
            r.body, self.buf = self.buf, b""
        return r


def check_api_answer(r, proto, action=None):
    """The invariants of an answer to an API request (signed or not)."""
    if r.status == 500:
        raise Violation("500 (InternalError): %r" % r.body[:500])
    if r.status == 503:
        if b"ServiceUnavailable" not in r.body:
            raise Violation("503 that is not ServiceUnavailable: %r" % r.body[:300])
        STATS["503"] += 1
        return
    if r.status in (414, 431) and b"<html>" in r.body:
        # libmicrohttpd's own answer to a request line or headers over its
        # connection memory (a GET with a long query string)
        STATS["head_too_big"] += 1
        return None
    if r.status not in API_STATUSES:
        raise Violation("status %d not allowed: %r" % (r.status, r.body[:300]))
    if not r.header("x-amzn-RequestId"):
        raise Violation("no x-amzn-RequestId header")
    ctype = (r.header("Content-Type") or "").lower()
    if "json" in ctype:
        if proto == "query":
            raise Violation("a Query request got a JSON answer")
        try:
            doc = json.loads(r.body) if r.body else {}
        except ValueError as e:
            raise Violation("the JSON answer does not parse (%s): %r" % (e, r.body[:300]))
        if not isinstance(doc, dict):
            raise Violation("the JSON answer is not an object: %r" % r.body[:300])
        if r.status >= 400:
            if not isinstance(doc.get("__type"), str) or not doc["__type"]:
                raise Violation("a JSON error without __type: %r" % r.body[:300])
            qe = r.header("x-amzn-query-error")
            if not qe or not re.match(r"^[A-Za-z.]+;(Sender|Receiver)$", qe):
                raise Violation("a JSON error without a good x-amzn-query-error (%r)" % qe)
            STATS["codes"][qe.split(";")[0]] = STATS["codes"].get(qe.split(";")[0], 0) + 1
        else:
            for m in doc.get("Messages", []) or []:
                HANDLES.append((None, m["ReceiptHandle"]))
        return doc
    if "xml" in ctype:
        if proto == "json" and r.status != 413:
            raise Violation("an AWS JSON request got an XML answer")
        try:
            root = ET.fromstring(r.body)
        except ET.ParseError as e:
            raise Violation("the XML answer does not parse (%s): %r" % (e, r.body[:300]))
        if r.status >= 400:
            code = root.find(".//{*}Code")
            if code is None or not code.text:
                raise Violation("an XML error without Code: %r" % r.body[:300])
            STATS["codes"][code.text] = STATS["codes"].get(code.text, 0) + 1
        else:
            for h in root.iter("{http://queue.amazonaws.com/doc/2012-11-05/}ReceiptHandle"):
                HANDLES.append((None, h.text))
        return root
    if r.status == 413:
        return None
    raise Violation("answer of Content-Type %r" % ctype)


def check_raw_answer(r):
    if r is None:
        return
    if r.status == 500:
        raise Violation("500 to raw HTTP: %r" % r.body[:300])
    if r.status not in RAW_STATUSES and r.status != 503:
        raise Violation("status %d to raw HTTP" % r.status)


# ------------------------------------------------------------ operations

STATS = {"ops": {}, "codes": {}, "503": 0, "status": {}, "raw_unanswered": 0, "head_too_big": 0}
HANDLES = []          # (queue url or None, receipt handle) from every answered receive
HELD = []             # half-sent connections left open
LP_SENT = [0]
LAST_SENT = [b""]     # the bytes of the last request sent, for a failure's report


def exchange(data, proto, action, allow_close=False):
    c = Conn()
    try:
        try:
            c.send(data)
        except (BrokenPipeError, ConnectionResetError):
            # the server answered (413, 414) and closed before reading all
            # of a large request
            if len(data) < 32768:
                raise Violation("the server closed the connection while a %d-byte request was sent" % len(data))
            allow_close = True
        try:
            r = c.read_response(allow_close=allow_close)
        except Violation as e:
            if allow_close and "closed" in str(e):
                r = None
            else:
                raise
    finally:
        c.close()
    if r is not None:
        STATS["status"][r.status] = STATS["status"].get(r.status, 0) + 1
        check_api_answer(r, proto, action)
    return r


def pick_action():
    return rng.choices(ACTIONS, weights=[WEIGHTS.get(a, 1) for a in ACTIONS])[0]


def op_api():
    action = pick_action()
    proto = rng.choice(["json", "query"])
    admin = rng.random() < 0.4
    data, desc = api_request(action, gen_input(action), proto,
                             key=ADMIN_KEY if admin else KEY, secret=ADMIN_SECRET if admin else SECRET)
    return desc, lambda: exchange(data, proto, action)


def op_garbage_body():
    action = pick_action()
    proto = rng.choice(["json", "query"])
    body = rng.choice([
        lambda: bytes(rng.randrange(256) for _ in range(rng.randrange(1, 2000))),
        lambda: b"=&&==%%&a=%zz&%&Action=ListQueues&=x",
        lambda: b"Action=ListQueues&" + b"a" * 70000 + b"=1",
        lambda: b"Action=" + b"%00" * 100,
        lambda: b"Action=ListQueues&" + b"&".join(b"p%d=1" % n for n in range(rng.choice([4095, 4097, 20000]))),
        lambda: b"\x00" * 1000,
        lambda: "é漢字".encode() * 100,
    ])()
    headers = {"Host": HOST}
    if proto == "json":
        headers["Content-Type"] = "application/x-amz-json-1.0"
        headers["X-Amz-Target"] = "AmazonSQS." + action
    else:
        headers["Content-Type"] = rng.choice(["application/x-www-form-urlencoded",
                                              "application/x-www-form-urlencoded; charset=latin1",
                                              "multipart/form-data; boundary=x", "text/plain"])
    url, headers = sign("POST", "http://%s/" % HOST, headers, body)
    data = build("POST", "/", headers, body)
    return "garbage body %s %s %r" % (proto, action, body[:200]), lambda: exchange(data, proto, action)


def op_badsig():
    action = pick_action()
    proto = rng.choice(["json", "query"])
    mode = rng.choice(["none", "secret", "key", "expired", "future", "mangle"])
    data, desc = api_request(action, gen_input(action), proto, sign_mode=mode)

    def run():
        r = exchange(data, proto, action)
        if r is not None and r.status == 200:
            raise Violation("a request signed %s was served" % mode)
    return desc, run


def raw_catalogue():
    big = rng.choice([8192, 70000, 1 << 20])
    return rng.choice([
        b"GET  HTTP/1.1\r\n\r\n", b"\r\n\r\n", b"FOO\r\n\r\n", b"POST / HTTP/9.9\r\nHost: x\r\n\r\n",
        b"POST / HTTP/1.0\r\nContent-Length: 0\r\n\r\n", b"POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nX: a\x00b\r\nContent-Length: 0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\n folded: y\r\nContent-Length: 0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * big + b"\r\nContent-Length: 0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"H%d: v\r\n" % n for n in range(rng.choice([100, 5000]))) + b"\r\n",
        b"POST /" + b"a" * big + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /?" + b"&".join(b"a%d=1" % n for n in range(5000)) + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 18446744073709551616\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nab\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\nab\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2;ext=1\r\n{}\r\n0\r\nTrailer: x\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n 2 \r\n{}\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: bogus\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + b"400000\r\n" + b"a" * 0x400000 + b"\r\n1\r\na\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}",
        b"POST / HTTP/1.1\r\nHost: x\r\nExpect: bogus\r\nContent-Length: 2\r\n\r\n{}",
        b"DELETE / HTTP/1.1\r\nHost: x\r\n\r\n", b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
        b"CONNECT x:1 HTTP/1.1\r\nHost: x\r\n\r\n", b"TRACE / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"POST http://x/ HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
        b"GET /%zz?%&Action=%ff%fe HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /?Action=ListQueues&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=%00&X-Amz-Signature=zz HTTP/1.1\r\nHost: x\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: AmazonSQS.ListQueues\r\nContent-Type: application/x-amz-json-1.0\r\nAuthorization: AWS4-HMAC-SHA256 Credential=" + b"a/" * 5000 + b"\r\nContent-Length: 2\r\n\r\n{}",
        bytes(rng.randrange(256) for _ in range(rng.randrange(1, 5000))),
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 40\r\n\r\nAction=ListQueues&" + b"\xff" * 22,
    ])


def op_raw():
    data = raw_catalogue()

    def run():
        c = Conn()
        try:
            try:
                c.send(data)
            except (BrokenPipeError, ConnectionResetError):
                pass            # the server may close before reading all of it
            while True:
                try:
                    # a request the server still waits the rest of (a
                    # chunk of 2^64 bytes) gets no answer: the health
                    # request after it shows the server still serves
                    r = c.read_response(allow_close=True, timeout=1.5)
                except Violation as e:
                    if "closed" in str(e) or ("a hang" in str(e) and not c.buf):
                        STATS["raw_unanswered"] += 1
                        return
                    raise
                check_raw_answer(r)
                if r is None or (r.header("Connection") or "").lower() == "close" or not c.buf:
                    return
        finally:
            c.close()
    return "raw %r" % data[:300], run


def signed_simple(action="ListQueues", proto=None, inp=None):
    proto = proto or rng.choice(["json", "query"])
    inp = inp if inp is not None else ({"QueueNamePrefix": "fz"} if action == "ListQueues" else {})
    headers = {"Host": HOST}
    if proto == "json":
        body = json.dumps(inp).encode()
        headers["Content-Type"] = "application/x-amz-json-1.0"
        headers["X-Amz-Target"] = "AmazonSQS." + action
    else:
        body = query_string([("Action", action), ("Version", "2012-11-05")] + flatten_query(action, inp)).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    url, headers = sign("POST", "http://%s/" % HOST, headers, body, ADMIN_KEY, ADMIN_SECRET)
    return build("POST", "/", headers, body), proto


def op_pipeline():
    reqs = [signed_simple(rng.choice(["ListQueues", "GetQueueUrl"]),
                          inp=None) for _ in range(rng.randrange(2, 6))]
    # GetQueueUrl with {} is a MissingParameter 400: fine, still an answer each
    data = b"".join(d for d, _ in reqs)

    def run():
        c = Conn()
        try:
            c.send(data)
            for _, proto in reqs:
                r = c.read_response()
                check_api_answer(r, proto)
        finally:
            c.close()
    return "pipeline of %d" % len(reqs), run


def op_slow():
    data, proto = signed_simple()
    mode = rng.choice(["slow", "half_close", "half_hold"])

    def run():
        c = Conn()
        if mode == "slow":
            try:
                n = rng.randrange(10, 40)
                step = max(1, len(data) // n)
                for off in range(0, len(data), step):
                    c.send(data[off:off + step])
                    time.sleep(0.01)
                check_api_answer(c.read_response(), proto)
            finally:
                c.close()
        else:
            c.send(data[:rng.randrange(0, len(data))])
            if mode == "half_close":
                c.close()
            else:
                HELD.append(c)
                if len(HELD) > 50:
                    HELD.pop(0).close()
    return "%s request" % mode, run


def op_oversize():
    mode = rng.choice(["declared", "sent"])
    headers = {"Host": HOST, "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.SendMessage"}

    def run():
        c = Conn()
        try:
            if mode == "declared":
                c.send(build("POST", "/", dict(headers, **{"Content-Length": str(rng.choice([4194305, 10 ** 9]))}), b""))
            else:
                body = b"{" + b" " * (4194304) + b"}"
                url, h = sign("POST", "http://%s/" % HOST, headers, body)
                try:
                    c.send(build("POST", "/", h, body))
                except (BrokenPipeError, ConnectionResetError):
                    pass
            try:
                r = c.read_response(allow_close=True)
            except Violation as e:
                if "closed" in str(e):
                    return
                raise
            if r is not None and r.status != 413:
                raise Violation("a body over 4 MiB got %d, not 413" % r.status)
        finally:
            c.close()
    return "oversize %s" % mode, run


def lp_stats():
    out = psql("SELECT visible || ',' || in_flight FROM queue.stats WHERE queue_name = '%s'" % LP_QUEUE)
    v, f = out.split(",")
    return int(v), int(f)


def op_longpoll_drop():
    """A long poll whose client leaves; a message sent then stays visible."""
    proto = rng.choice(["json", "query"])
    data, _ = api_request("ReceiveMessage", {"QueueUrl": BASE + LP_QUEUE, "WaitTimeSeconds": rng.choice([5, 20]),
                                             "VisibilityTimeout": 600}, proto,
                          key=ADMIN_KEY, secret=ADMIN_SECRET)

    def run():
        # the generated body may be mangled: require a clean one here
        c = Conn()
        c.send(clean_lp(proto))
        time.sleep(rng.uniform(0.2, 0.6))
        c.close()
        time.sleep(0.05)
        send, sproto = signed_simple("SendMessage", inp={"QueueUrl": BASE + LP_QUEUE, "MessageBody": "lp"})
        r = exchange(send, sproto, "SendMessage")
        if r.status != 200:
            raise Violation("SendMessage to %s got %d: %r" % (LP_QUEUE, r.status, r.body[:300]))
        LP_SENT[0] += 1
        time.sleep(0.3)
        v, f = lp_stats()
        if f != 0:
            raise Violation("a long poll whose client left leased a message (in_flight %d)" % f)
        if v != 1:
            raise Violation("%s has %d visible messages, 1 was sent" % (LP_QUEUE, v))
        # never received before; and the queue is empty again for the next one
        rc = psql("SELECT string_agg(receive_count::text, ',') FROM queue.receive('%s', 10)" % LP_QUEUE)
        if rc != "1":
            raise Violation("%s: receive counts %r, not one message never received before" % (LP_QUEUE, rc))
        psql("SELECT queue.purge('%s')" % LP_QUEUE)
    return "long poll dropped (%s)" % proto, run


def clean_lp(proto):
    inp = {"QueueUrl": BASE + LP_QUEUE, "WaitTimeSeconds": 20, "VisibilityTimeout": 600}
    headers = {"Host": HOST}
    if proto == "json":
        body = json.dumps(inp).encode()
        headers["Content-Type"] = "application/x-amz-json-1.0"
        headers["X-Amz-Target"] = "AmazonSQS.ReceiveMessage"
    else:
        body = query_string([("Action", "ReceiveMessage"), ("Version", "2012-11-05")]
                            + flatten_query("ReceiveMessage", inp)).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    url, headers = sign("POST", "http://%s/" % HOST, headers, body, ADMIN_KEY, ADMIN_SECRET)
    return build("POST", "/", headers, body)


def op_unsigned_body():
    """An unsigned request declaring a large body, sent in part: refused
    (403 MissingAuthenticationToken) at its headers, before the body."""
    size = rng.choice([1024, 65536, 1 << 20, 4 << 20])
    proto = rng.choice(["json", "query"])
    headers = {"Host": HOST, "Content-Length": str(size)}
    if proto == "json":
        headers.update({"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.SendMessage"})
    else:
        headers["Content-Type"] = "application/x-www-form-urlencoded"

    def run():
        c = Conn()
        try:
            c.send(build("POST", "/", headers, b"") + b"x" * min(size // 2, 4096))
            r = c.read_response(allow_close=True)
            if r is None or r.status != 403:
                raise Violation("an unsigned %d-byte body got %s, not 403 at its headers" %
                                (size, r.status if r else "no answer"))
        finally:
            c.close()
    return "unsigned %s body of %d bytes" % (proto, size), run


def op_presigned_replay():
    """A URL presigned for ListQueues, replayed with what it did not sign:
    a body naming another action, an unsigned X-Amz-Target."""
    url, h = sign("GET", "http://%s/?Action=ListQueues&Version=2012-11-05" % HOST, {"Host": HOST}, b"",
                  presign=True)
    pq = url[len("http://%s" % HOST):]
    mode = rng.choice(["json_body", "form_body", "target"])
    headers = {"Host": HOST}
    body = b""
    method = "GET"          # the method it was signed for: only the rest differs
    if mode == "json_body":
        headers.update({"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.PurgeQueue"})
        body = json.dumps({"QueueUrl": BASE + "fz_std"}).encode()
    elif mode == "form_body":
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        body = ("Action=PurgeQueue&QueueUrl=" + urllib.parse.quote(BASE + "fz_std", safe="")).encode()
    else:
        headers["X-Amz-Target"] = rng.choice(["AmazonSQS.PurgeQueue", "AmazonSQS.ListQueues"])
    data = build(method, pq, headers, body)

    def run():
        c = Conn()
        try:
            c.send(data)
            r = c.read_response(allow_close=True)
            if r is not None and r.status == 200:
                raise Violation("a presigned ListQueues replayed with an unsigned %s was served" % mode)
        finally:
            c.close()
    return "presigned replay %s" % mode, run


def op_locked():
    """A lock held in SQL on a queue while requests to it arrive: they are
    answered 200 once it is gone or 503 ServiceUnavailable, and a request
    to another queue is answered in under 1 s meanwhile."""
    hold = rng.choice([0.3, 1.0, 2.0])
    proto = rng.choice(["json", "query"])
    send, sproto = signed_simple("SendMessage", proto=proto,
                                 inp={"QueueUrl": BASE + "fz_lock", "MessageBody": "locked"})

    def run():
        locker = subprocess.Popen([PSQL, "-X", "-Atq", "-v", "ON_ERROR_STOP=1", "-c",
                                   "BEGIN; SELECT queue.purge('fz_lock'); SELECT pg_sleep(%s); COMMIT;" % hold],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.15)
            c = Conn()
            try:
                c.send(send)
                t0 = time.monotonic()
                health()
                took = time.monotonic() - t0
                if took > 1.0:
                    raise Violation("a ListQueues took %.2f s while a lock was held on another queue" % took)
                r = c.read_response(timeout=30)
                if r is None or not (r.status == 200 or (r.status == 503 and "ServiceUnavailable" in r.body)):
                    raise Violation("a send to a locked queue got %s" % (r.status if r else "no answer"))
            finally:
                c.close()
        finally:
            locker.wait(timeout=60)
    return "send to a queue locked for %.1f s (%s)" % (hold, sproto), run


OPS = [(op_api, 50), (op_garbage_body, 6), (op_badsig, 8), (op_raw, 14), (op_pipeline, 4),
       (op_slow, 6), (op_oversize, 1), (op_longpoll_drop, 2), (op_unsigned_body, 2),
       (op_presigned_replay, 2), (op_locked, 2)]

# ------------------------------------------------------------- checkers

def psql(sql):
    out = subprocess.run([PSQL, "-X", "-Atq", "-v", "ON_ERROR_STOP=1", "-c", sql],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise Violation("psql failed: %s" % out.stderr.strip())
    return out.stdout.strip()


def worker_pids():
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
            ppid = int(st.rsplit(")", 1)[1].split()[1])
            if ppid != PM_PID:
                continue
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if b"queue sqs worker" in cmd:
            pids.append(int(d))
    return sorted(pids)


LOG_POS = [0]
BAD_LOG = re.compile(r"PANIC|TRAP:|terminated by signal|was terminated|server process .* exited|"
                     r"parked again after its time|could not fork")


def check_log():
    with open(SERVER_LOG, "rb") as f:
        f.seek(LOG_POS[0])
        new = f.read()
        LOG_POS[0] += len(new)
    bad = [ln for ln in new.decode("utf-8", "replace").splitlines() if BAD_LOG.search(ln)]
    if bad:
        raise Violation("the server log shows:\n  " + "\n  ".join(bad[:10]))


def health():
    keep = LAST_SENT[0]
    data, proto = signed_simple("ListQueues")
    try:
        r = exchange(data, proto, "ListQueues")
    finally:
        LAST_SENT[0] = keep
    if r.status != 200:
        raise Violation("the health request (signed ListQueues) got %d: %r" % (r.status, r.body[:300]))


def final_checks():
    for c in HELD:
        c.close()
    # every message the fuzz received goes: delete by handle (admin key),
    # over JSON; a handle of a queue it does not name is found by trying all
    names = psql("SELECT string_agg(queue_name, E'\\n' ORDER BY queue_id) FROM queue.queues").split("\n")
    urls = [BASE + urllib.parse.quote(n, safe="") for n in names if n]
    for _, h in HANDLES:
        for u in urls:
            data, _ = signed_simple("DeleteMessage", proto="json", inp={"QueueUrl": u, "ReceiptHandle": h})
            r = exchange(data, "json", "DeleteMessage")
            if r.status == 200:
                break
    # handles the fuzz got and then changed or re-leased: any left in flight
    # must be explained by a handle the fuzz holds; there are none now
    left = psql("SELECT coalesce(string_agg(queue_name || ':' || in_flight, ' '), '') FROM queue.stats"
                " WHERE in_flight > 0")
    if left:
        # a message whose handle the fuzz made stale (received again after
        # its visibility ended) was deleted with its latest handle; a
        # message in flight now was leased by an answer nobody read
        raise Violation("messages in flight after the fuzz deleted every handle it got: %s" % left)
    check_log()


def regressions():
    """Requests that once broke an invariant, sent first in every run."""
    cases = [
        # an error message quoting a long value was cut inside a character
        ("SendMessage", {"QueueUrl": BASE + "fz_fifo.fifo", "MessageBody": "x", "MessageGroupId": "g",
                         "MessageDeduplicationId": "\u00e9" * 600}),
        ("SendMessage", {"QueueUrl": BASE + "fz_std", "MessageBody": "x",
                         "MessageAttributes": {"\u6f22" * 400: {"DataType": "String", "StringValue": "v"}}}),
    ]
    for action, inp in cases:
        for proto in ("json", "query"):
            data, proto = signed_simple(action, proto=proto, inp=inp)
            exchange(data, proto, action)
    return "the fixed regression requests"


def main():
    print("sqs_fuzz: seed %d, %d iterations, port %d" % (SEED, ITERATIONS, PORT), flush=True)
    pids = worker_pids()
    if len(pids) < 1:
        print("sqs_fuzz: FAIL: no sqs worker under postmaster %d" % PM_PID)
        return 1
    check_log()
    health()
    t0 = time.monotonic()
    desc = "the fixed regression requests"
    it = 0
    try:
        regressions()
        for it in range(1, ITERATIONS + 1):
            op = rng.choices([o for o, _ in OPS], weights=[w for _, w in OPS])[0]
            desc, run = op()
            STATS["ops"][op.__name__] = STATS["ops"].get(op.__name__, 0) + 1
            if VERBOSE:
                print("%5d %s" % (it, desc[:200]), flush=True)
            run()
            try:
                health()
            except Violation as e:
                raise Violation("after this request: " + str(e))
            now = worker_pids()
            if now != pids:
                raise Violation("the sqs workers changed: %s -> %s (a crash or a restart)" % (pids, now))
            if it % 50 == 0:
                check_log()
        desc = "the final checks"
        final_checks()
        if worker_pids() != pids:
            raise Violation("the sqs workers changed at the end")
    except Violation as e:
        print("sqs_fuzz: FAIL (seed %d, iteration %d): %s" % (SEED, it, e), flush=True)
        print("sqs_fuzz: the request: %s" % desc[:2000], flush=True)
        print("sqs_fuzz: its last bytes sent (%d): %r" % (len(LAST_SENT[0]), LAST_SENT[0][:3000]), flush=True)
        if os.environ.get("FUZZ_DUMP"):
            with open(os.environ["FUZZ_DUMP"], "wb") as f:
                f.write(LAST_SENT[0])
        return 1
    print("sqs_fuzz: %d iterations in %.1f s, seed %d; ops %s; statuses %s; 503s %d; %d handles deleted; "
          "%d long polls dropped; %d raw requests unanswered; %d heads too big; error codes %s" % (
              ITERATIONS, time.monotonic() - t0, SEED, STATS["ops"], dict(sorted(STATS["status"].items())),
              STATS["503"], len(HANDLES), LP_SENT[0], STATS["raw_unanswered"], STATS["head_too_big"], dict(sorted(STATS["codes"].items()))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
