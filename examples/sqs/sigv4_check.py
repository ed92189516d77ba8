#!/usr/bin/python3
"""examples/sqs/sigv4_check.py: the SQS endpoint's SigV4 checks, with requests
signed by the SDKs' own signers.

Requests are signed by botocore (SigV4Auth for the Authorization header,
SigV4QueryAuth for presigned URLs) and by the JS SDK's @smithy/signature-v4
(examples/sqs/node/sigv4_sign.mjs, from the node example's node_modules),
then sent byte for byte with http.client.  Odd paths (percent-encoded
characters, double slashes, dot segments), query strings with reserved
characters and repeated keys, extra signed headers with inner blanks, the
Date header instead of X-Amz-Date: each must be accepted.  The same requests
tampered (a body byte, a header value, the path, a query value), signed 16
minutes off, presigned and expired, under an unknown key or a wrong secret,
with the wrong service or region in the scope, with parts of the
Authorization missing or none at all: each must be refused with its 403 code
(the JSON __type or the XML Code).

Environment: SQS_ENDPOINT_URL (http://host:port), AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION; NODE (default node).
Prints one line per case, "ok <name>" or "FAILED <name>: ...", then
"sigv4: N passed, M failed"; exit status 1 when any failed.
Run with /usr/bin/python3 -I (Debian's botocore).
"""
import datetime
import hashlib
import http.client
import json
import os
import re
import subprocess
import sys
import urllib.parse

import botocore.auth
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

HERE = os.path.dirname(os.path.abspath(__file__))
ENDPOINT = os.environ.get("SQS_ENDPOINT_URL", "http://127.0.0.1:9324").rstrip("/")
KEY = os.environ["AWS_ACCESS_KEY_ID"]
SECRET = os.environ["AWS_SECRET_ACCESS_KEY"]
REGION = os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
NETLOC = urllib.parse.urlsplit(ENDPOINT).netloc
AUTH_CODES = {"InvalidClientTokenId", "SignatureDoesNotMatch", "IncompleteSignature",
              "MissingAuthenticationToken", "RequestExpired"}
JSON_HEADERS = [("Content-Type", "application/x-amz-json-1.0"),
                ("X-Amz-Target", "AmazonSQS.ListQueues")]
SKEW = datetime.timedelta(minutes=16)


class _Clock:
    """botocore signs at datetime.datetime.utcnow() (get_current_datetime()
    in newer releases); this moves that clock."""

    def __init__(self, at):
        self.at = at

    def __enter__(self):
        at = self.at

        class Fixed(datetime.datetime):
            @classmethod
            def utcnow(cls):
                return at

        class Module:
            datetime = Fixed

        self.saved = botocore.auth.datetime
        # newer botocore (1.31 on, Debian sid's) asks get_current_datetime()
        self.saved_now = getattr(botocore.auth, "get_current_datetime", None)
        if at is not None:
            botocore.auth.datetime = Module
            if self.saved_now is not None:
                botocore.auth.get_current_datetime = lambda *args, **kwargs: at

    def __exit__(self, *exc):
        botocore.auth.datetime = self.saved
        if self.saved_now is not None:
            botocore.auth.get_current_datetime = self.saved_now


def utcnow():
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def boto_sign(method, path, query="", headers=(), body=b"", *, presign=False,
              expires=3600, at=None, key=None, secret=None, region=None,
              service="sqs"):
    """A request signed by botocore: {method, path, query, headers, body}."""
    url = ENDPOINT + path + ("?" + query if query else "")
    req = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
    creds = Credentials(key or KEY, secret or SECRET)
    region = region or REGION
    signer = (SigV4QueryAuth(creds, service, region, expires) if presign
              else SigV4Auth(creds, service, region))
    with _Clock(at):
        signer.add_auth(req)
    split = urllib.parse.urlsplit(req.url)
    data = req.data or b""
    if isinstance(data, str):
        data = data.encode()
    return {"method": method, "path": split.path, "query": split.query,
            "headers": list(req.headers.items()), "body": data}


def js_sign(requests):
    """Requests signed by @smithy/signature-v4 (node/sigv4_sign.mjs)."""
    spec = {"key": KEY, "secret": SECRET, "region": REGION, "service": "sqs",
            "host": NETLOC, "requests": requests}
    node = os.environ.get("NODE", "node")
    out = subprocess.run([node, os.path.join(HERE, "node", "sigv4_sign.mjs")],
                         input=json.dumps(spec).encode(), capture_output=True,
                         cwd=os.path.join(HERE, "node"), check=True)
    signed = json.loads(out.stdout)
    for s in signed:
        s["body"] = s["body"].encode()
    return signed


def send(r):
    """Send r exactly as signed; (status, error code or None, body text)."""
    split = urllib.parse.urlsplit(ENDPOINT)
    conn = http.client.HTTPConnection(split.hostname, split.port, timeout=30)
    target = r["path"] + ("?" + r["query"] if r["query"] else "")
    conn.putrequest(r["method"], target, skip_host=True, skip_accept_encoding=True)
    names = {n.lower() for n, _ in r["headers"]}
    if "host" not in names:
        conn.putheader("Host", NETLOC)
    for name, value in r["headers"]:
        conn.putheader(name, value)
    body = r["body"]
    if body or r["method"] in ("POST", "PUT"):
        conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body if body else None)
    resp = conn.getresponse()
    text = resp.read().decode("utf-8", "replace")
    conn.close()
    code = None
    if resp.status >= 300:
        m = re.search(r'"__type"\s*:\s*"(?:[^"#]*#)?([^"]+)"', text)
        if m is None:
            m = re.search(r"<Code>([^<]+)</Code>", text)
        if m:
            code = m.group(1)
        else:
            qe = resp.getheader("x-amzn-query-error")
            code = qe.split(";")[0] if qe else None
    return resp.status, code, text


def retarget(r, **changes):
    """A copy of the signed request r with some parts changed."""
    t = dict(r)
    t["headers"] = list(r["headers"])
    t.update(changes)
    return t


def set_header(r, name, fn):
    """A copy of r with header name's value replaced by fn(old value)."""
    t = retarget(r)
    t["headers"] = [(n, fn(v) if n.lower() == name.lower() else v) for n, v in r["headers"]]
    return t


def main():
    now = utcnow()
    ok200, accepted, refused = [], [], []

    # --- botocore, Authorization header ---------------------------------
    plain = boto_sign("POST", "/", "", JSON_HEADERS, b"{}")
    ok200.append(("botocore header, JSON ListQueues", plain))
    ok200.append(("botocore header, Query ListQueues (form body)", boto_sign(
        "POST", "/", "",
        [("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")],
        b"Action=ListQueues&Version=2012-11-05")))
    for path in ("/a%20b/c%2Fd", "//double//slash/", "/./x/../y/.", "/%7Euser/~x/caf%C3%A9",
                 "/a+b/%2a%2B!$&'()*,;=:@"):
        accepted.append((f"botocore header, path {path}",
                         boto_sign("POST", path, "", JSON_HEADERS, b"{}")))
    query = ("z=1&a=%2F%3F%26%3D&a=b%20c&a=&k~=v%2A&empty&%C3%A9=%E2%82%AC"
             "&sp=a%2Bb&A=upper")
    query_req = boto_sign("POST", "/", query, JSON_HEADERS, b"{}")
    ok200.append(("botocore header, reserved characters and repeated keys in the query",
                  query_req))
    blanks = boto_sign("POST", "/", "probe=1",
                       JSON_HEADERS + [("X-Custom-Meta", "  a   b \t  c  "),
                                       ("X-Amz-Meta-Other", "one,two")], b"{}")
    ok200.append(("botocore header, extra signed headers with inner blanks", blanks))
    dated = boto_sign("POST", "/", "", JSON_HEADERS + [("Date", "x")], b"{}")
    assert not any(n.lower() == "x-amz-date" for n, _ in dated["headers"])
    ok200.append(("botocore header, dated by the Date header", dated))
    ok200.append(("botocore header, 10 minutes old", boto_sign(
        "POST", "/", "", JSON_HEADERS, b"{}", at=now - datetime.timedelta(minutes=10))))
    ok200.append(("botocore header, empty body (GET, Query)", boto_sign(
        "GET", "/", "Action=ListQueues&Version=2012-11-05", [], b"")))

    # --- botocore, presigned --------------------------------------------
    pre = boto_sign("GET", "/", "Action=ListQueues&Version=2012-11-05", [], b"",
                    presign=True)
    ok200.append(("botocore presigned GET, Query ListQueues", pre))
    ok200.append(("botocore presigned, 20 minutes into a 1 hour lifetime", boto_sign(
        "GET", "/", "Action=ListQueues&Version=2012-11-05&QueueNamePrefix=a%2Fb", [], b"",
        presign=True, at=now - datetime.timedelta(minutes=20))))

    # --- JS SDK signer ----------------------------------------------------
    jhead = {"content-type": "application/x-amz-json-1.0",
             "x-amz-target": "AmazonSQS.ListQueues"}
    js_specs = [
        {"method": "POST", "path": "/", "headers": jhead, "body": "{}"},
        {"method": "POST", "path": "/000000000000/a%20b//c", "headers": jhead, "body": "{}"},
        {"method": "POST", "path": "/", "query": {"z": "1", "a": ["/?&=", "b c", ""],
                                                   "k~": "v*", "\u00e9": "\u20ac"},
         "headers": {**jhead, "x-custom-meta": " a   b\t c "}, "body": "{}"},
        {"method": "GET", "path": "/",
         "query": {"Action": "ListQueues", "Version": "2012-11-05"}, "presign": True},
        {"method": "POST", "path": "/", "headers": jhead, "body": "{}",
         "date": iso(now - SKEW)},
        {"method": "GET", "path": "/",
         "query": {"Action": "ListQueues", "Version": "2012-11-05"}, "presign": True,
         "expires": 60, "date": iso(now - datetime.timedelta(minutes=5))},
        {"method": "POST", "path": "/", "headers": jhead, "body": "{}", "key": "AKIDNOSUCHKEY0"},
        {"method": "POST", "path": "/", "headers": jhead, "body": "{}", "service": "sns"},
    ]
    js = js_sign(js_specs)
    js_plain, js_path, js_query, js_pre, js_skewed, js_expired, js_nokey, js_sns = js
    ok200.append(("JS signer header, JSON ListQueues", js_plain))
    accepted.append(("JS signer header, path with %20 and //", js_path))
    ok200.append(("JS signer header, reserved characters, repeated keys, blanks", js_query))
    ok200.append(("JS signer presigned GET, Query ListQueues", js_pre))
    refused.append(("JS signer, 16 minutes old", js_skewed, "RequestExpired"))
    refused.append(("JS signer presigned, 60 s lifetime 5 minutes ago", js_expired,
                    "RequestExpired"))
    refused.append(("JS signer, unknown key", js_nokey, "InvalidClientTokenId"))
    refused.append(("JS signer, service sns in the scope", js_sns, "SignatureDoesNotMatch"))
    refused.append(("JS signer, body byte changed (x-amz-content-sha256 signed)",
                    retarget(js_plain, body=b"{ }"), "SignatureDoesNotMatch"))
    refused.append(("JS signer, body and its x-amz-content-sha256 changed",
                    set_header(retarget(js_plain, body=b"{ }"), "x-amz-content-sha256",
                               lambda v: hashlib.sha256(b"{ }").hexdigest()),
                    "SignatureDoesNotMatch"))
    refused.append(("JS signer, query value changed",
                    retarget(js_query, query=js_query["query"].replace("z=1", "z=2")),
                    "SignatureDoesNotMatch"))
    refused.append(("JS signer presigned, path changed", retarget(js_pre, path="/x"),
                    "SignatureDoesNotMatch"))

    # --- refusals of botocore-signed requests -----------------------------
    refused.append(("body byte changed", retarget(plain, body=b"{ }"), "SignatureDoesNotMatch"))
    refused.append(("header value changed",
                    set_header(blanks, "X-Custom-Meta", lambda v: v.replace("b", "B")),
                    "SignatureDoesNotMatch"))
    refused.append(("signed header removed",
                    retarget(blanks, headers=[(n, v) for n, v in blanks["headers"]
                                              if n.lower() != "x-custom-meta"]),
                    "SignatureDoesNotMatch"))
    refused.append(("path changed", retarget(plain, path="/x"), "SignatureDoesNotMatch"))
    refused.append(("path with a dot segment added", retarget(plain, path="/x/.."),
                    "OK"))  # normalises to "/": same canonical path, accepted
    refused.append(("query value changed",
                    retarget(query_req, query=query_req["query"].replace("z=1", "z=3")),
                    "SignatureDoesNotMatch"))
    refused.append(("query parameter added",
                    retarget(query_req, query=query_req["query"] + "&extra=1"),
                    "SignatureDoesNotMatch"))
    refused.append(("presigned query value changed",
                    retarget(pre, query=pre["query"].replace("ListQueues", "ListQueuez")),
                    "SignatureDoesNotMatch"))
    refused.append(("presigned signature changed",
                    retarget(pre, query=re.sub(r"X-Amz-Signature=([0-9a-f])",
                                               lambda m: "X-Amz-Signature=" +
                                               ("1" if m.group(1) != "1" else "2"),
                                               pre["query"])),
                    "SignatureDoesNotMatch"))
    refused.append(("method changed", retarget(plain, method="PUT"), "SignatureDoesNotMatch"))
    refused.append(("16 minutes old", boto_sign("POST", "/", "", JSON_HEADERS, b"{}",
                                                at=now - SKEW), "RequestExpired"))
    refused.append(("16 minutes ahead", boto_sign("POST", "/", "", JSON_HEADERS, b"{}",
                                                  at=now + SKEW), "RequestExpired"))
    refused.append(("Date header 16 minutes old",
                    boto_sign("POST", "/", "", JSON_HEADERS + [("Date", "x")], b"{}",
                              at=now - SKEW), "RequestExpired"))
    refused.append(("presigned, 60 s lifetime 2 minutes ago",
                    boto_sign("GET", "/", "Action=ListQueues&Version=2012-11-05", [], b"",
                              presign=True, expires=60,
                              at=now - datetime.timedelta(minutes=2)), "RequestExpired"))
    refused.append(("unknown key", boto_sign("POST", "/", "", JSON_HEADERS, b"{}",
                                             key="AKIDNOSUCHKEY0"), "InvalidClientTokenId"))
    refused.append(("presigned, unknown key",
                    boto_sign("GET", "/", "Action=ListQueues&Version=2012-11-05", [], b"",
                              presign=True, key="AKIDNOSUCHKEY0"), "InvalidClientTokenId"))
    refused.append(("wrong secret", boto_sign("POST", "/", "", JSON_HEADERS, b"{}",
                                              secret=SECRET + "x"), "SignatureDoesNotMatch"))
    refused.append(("service sns in the scope", boto_sign("POST", "/", "", JSON_HEADERS, b"{}",
                                                          service="sns"),
                    "SignatureDoesNotMatch"))
    other_region = "eu-west-3" if REGION != "eu-west-3" else "eu-west-2"
    refused.append(("region in the scope changed after signing",
                    set_header(plain, "Authorization",
                               lambda v: v.replace(f"/{REGION}/", f"/{other_region}/")),
                    "SignatureDoesNotMatch"))
    refused.append(("scope date not the request's date",
                    set_header(plain, "Authorization",
                               lambda v: re.sub(r"/(\d{8})/", "/19990101/", v)),
                    "SignatureDoesNotMatch"))
    refused.append(("no Authorization",
                    retarget(plain, headers=[(n, v) for n, v in plain["headers"]
                                             if n.lower() != "authorization"]),
                    "MissingAuthenticationToken"))
    refused.append(("Authorization without Signature",
                    set_header(plain, "Authorization",
                               lambda v: re.sub(r",\s*Signature=[0-9a-f]+", "", v)),
                    "IncompleteSignature"))
    refused.append(("host not among the signed headers",
                    set_header(plain, "Authorization",
                               lambda v: v.replace("host;", "").replace(";host", "")),
                    "IncompleteSignature"))
    refused.append(("another algorithm",
                    set_header(plain, "Authorization",
                               lambda v: v.replace("AWS4-HMAC-SHA256", "AWS4-HMAC-SHA512")),
                    "IncompleteSignature"))
    refused.append(("no date at all",
                    retarget(plain, headers=[(n, v) for n, v in plain["headers"]
                                             if n.lower() != "x-amz-date"]),
                    "IncompleteSignature"))
    refused.append(("presigned without X-Amz-Credential",
                    retarget(pre, query=re.sub(r"&?X-Amz-Credential=[^&]*", "", pre["query"])),
                    "IncompleteSignature"))

    passed = failed = 0

    def report(name, good, detail):
        nonlocal passed, failed
        if good:
            passed += 1
            print(f"ok {name}")
        else:
            failed += 1
            print(f"FAILED {name}: {detail}")

    for name, r in ok200:
        status, code, text = send(r)
        report(name, status == 200, f"status {status} {code} {text[:300]}")
    for name, r in accepted:
        status, code, text = send(r)
        report(name, status != 403 and status < 500 and code not in AUTH_CODES,
               f"status {status} {code} {text[:300]}")
    for name, r, want in refused:
        status, code, text = send(r)
        if want == "OK":
            report(name, status == 200, f"status {status} {code} {text[:300]}")
        else:
            report(name, status == 403 and code == want,
                   f"want 403 {want}, got {status} {code} {text[:300]}")
    print(f"sigv4: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
