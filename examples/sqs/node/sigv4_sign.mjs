// examples/sqs/node/sigv4_sign.mjs: sign HTTP requests with the JS SDK's own
// SigV4 signer (@smithy/signature-v4, which @aws-sdk/client-sqs signs with),
// for examples/sqs/sigv4_check.py.  Sends nothing.
//
// stdin: {"key", "secret", "region", "service", "host",
//         "requests": [{"method", "path", "query": {name: value or [values]},
//                       "headers": {...}, "body", "presign", "expires",
//                       "date": ISO time or null}]}
// stdout: [{"method", "path", "query" (the query string as sent),
//           "headers": [[name, value], ...], "body"}]
import { SignatureV4 } from "@smithy/signature-v4";
import { Sha256 } from "@smithy/core/checksum";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const spec = JSON.parse(Buffer.concat(chunks).toString("utf8"));

// RFC 3986 encoding, as the SDK's escapeUri writes a query on the wire.
const enc = (s) =>
  encodeURIComponent(s).replace(/[!'()*]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase());

function queryString(query) {
  const parts = [];
  for (const [name, value] of Object.entries(query)) {
    for (const v of Array.isArray(value) ? value : [value]) parts.push(`${enc(name)}=${enc(v)}`);
  }
  return parts.join("&");
}

const out = [];
for (const r of spec.requests) {
  const signer = new SignatureV4({
    service: r.service ?? spec.service,
    region: r.region ?? spec.region,
    credentials: { accessKeyId: r.key ?? spec.key, secretAccessKey: r.secret ?? spec.secret },
    sha256: Sha256,
  });
  const request = {
    method: r.method,
    protocol: "http:",
    hostname: spec.host.split(":")[0],
    port: Number(spec.host.split(":")[1]),
    path: r.path,
    query: r.query ?? {},
    headers: { host: spec.host, ...(r.headers ?? {}) },
    body: r.body ?? undefined,
  };
  const signingDate = r.date ? new Date(r.date) : new Date();
  const signed = r.presign
    ? await signer.presign(request, { signingDate, expiresIn: r.expires ?? 3600 })
    : await signer.sign(request, { signingDate });
  out.push({
    method: signed.method,
    path: signed.path,
    query: queryString(signed.query),
    headers: Object.entries(signed.headers),
    body: r.body ?? "",
  });
}
process.stdout.write(JSON.stringify(out));
