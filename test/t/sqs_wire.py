#!/usr/bin/env python3
"""sqs_wire.py: send SigV4-signed raw requests to the SQS endpoint and
report what came back on the wire (for the TAP tests, e.g. 024).

    python3 sqs_wire.py PORT ACCESS_KEY SECRET < requests.jsonl

Each input line is a JSON object:
    proto   "json" (X-Amz-Target, AWS JSON 1.0) or "query" (form body)
    action  the action name (X-Amz-Target's or the Action parameter)
    input   the action's input shape; query: flattened by botocore's own
            Query serializer (its model), or as scalars for actions the
            model lacks (the message move tasks)
    params  query only: [[name, value], ...] added as given (bad names)
    raw     json only: the body as given, instead of input (malformed JSON)
    target  json only: the whole X-Amz-Target header instead of AmazonSQS.<action>
    no_action  query only: leave the Action parameter out
    headers extra request headers, signed with the rest ({name: value})
    path    query only: the request's path (default "/"), as older clients
            send a queue's requests to its URL (boto 2, fog-aws)
    sign    "good" (default), "none", "secret" (wrong secret), "key" (unknown key)
Each output line is a JSON object: status, qerr (x-amzn-query-error),
ctype, body, and for errors code and type (Query: botocore's own parse of
the ErrorResponse; JSON: __type), for Query successes "parsed": botocore's
parse of the XML with its Query model (the SQS model botocore 1.29 has).
"""
import http.client
import json
import sys
import urllib.parse

import botocore.session
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.parsers import QueryParser
from botocore.serialize import QuerySerializer

port, key, secret = sys.argv[1], sys.argv[2], sys.argv[3]
host = "127.0.0.1:%s" % port
region = "us-east-1"
model = botocore.session.get_session().get_service_model("sqs")
conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=60)


def send(req):
    proto = req["proto"]
    action = req.get("action", "")
    headers = {"Host": host}
    headers.update(req.get("headers", {}))
    if proto == "json":
        body = req["raw"] if "raw" in req else json.dumps(req.get("input", {}))
        headers["Content-Type"] = "application/x-amz-json-1.0"
        headers["X-Amz-Target"] = req.get("target", "AmazonSQS." + action)
        headers["x-amzn-query-mode"] = "true"
    else:
        inp = req.get("input", {})
        if action in model.operation_names:
            flat = QuerySerializer().serialize_to_request(
                inp, model.operation_model(action))["body"]
        else:
            flat = {"Action": action, "Version": "2012-11-05"}
            flat.update({k: str(v) for k, v in inp.items()})
        if req.get("no_action"):
            flat.pop("Action", None)
        params = list(flat.items()) + [tuple(p) for p in req.get("params", [])]
        body = urllib.parse.urlencode(params)
        headers["Content-Type"] = "application/x-www-form-urlencoded; charset=utf-8"
    body = body.encode("utf-8")
    sign = req.get("sign", "good")
    if sign != "none":
        creds = Credentials(key if sign != "key" else "AKIDNOSUCHKEY0000000",
                            secret if sign != "secret" else secret + "x")
        aws = AWSRequest(method="POST", url="http://%s%s" % (host, req.get("path", "/")), data=body,
                         headers=headers)
        SigV4Auth(creds, "sqs", region).add_auth(aws)
        headers = dict(aws.headers.items())
    conn.request("POST", req.get("path", "/"), body=body, headers=headers)
    r = conn.getresponse()
    data = r.read()
    out = {
        "status": r.status,
        "qerr": r.getheader("x-amzn-query-error"),
        "ctype": r.getheader("Content-Type"),
        "request_id": r.getheader("x-amzn-RequestId"),
        "body": data.decode("utf-8", "replace"),
    }
    if proto == "json":
        try:
            doc = json.loads(data) if data else {}
        except ValueError:
            doc = {}
        if r.status >= 400:
            out["type"] = doc.get("__type")
            out["message"] = doc.get("message")
            out["code"] = (out["qerr"] or "").split(";")[0]
        else:
            out["parsed"] = doc
    elif (out["ctype"] or "").startswith("application/json"):
        # a Query request that asked for JSON (Accept: application/json)
        out["json"] = json.loads(data) if data else {}
        if r.status >= 400:
            err = out["json"].get("Error", {})
            out["code"], out["type"], out["message"] = err.get("Code"), err.get("Type"), err.get("Message")
    else:
        shape = None
        if action in model.operation_names:
            shape = model.operation_model(action).output_shape
        parsed = QueryParser().parse(
            {"body": data, "headers": dict(r.getheaders()),
             "status_code": r.status}, shape)
        if r.status >= 400:
            err = parsed.get("Error", {})
            out["code"] = err.get("Code")
            out["type"] = err.get("Type")
            out["message"] = err.get("Message")
        else:
            parsed.pop("ResponseMetadata", None)
            out["parsed"] = json.loads(json.dumps(parsed, default=str))
    return out


for line in sys.stdin:
    line = line.strip()
    if line:
        print(json.dumps(send(json.loads(line))), flush=True)
