// s3check.mjs - an S3 server for the tests (issue 25): s3rver (npm) on a
// port of its own behind a checker that verifies every request's AWS
// Signature V4 with AWS's own signer (@smithy/signature-v4), as S3 does.
//
//   node s3check.mjs CONFIG.json
//
// CONFIG: {"dir": s3rver's directory, "seed": a directory whose
// BUCKET/KEY... files are uploaded at start, "creds": {ACCESS_KEY:
// {"secret": S, "token": T (a session's, required when given)}},
// "public": [buckets anyone may read unsigned], "page": ListObjectsV2's
// page size (max-keys forced to it, so that listings are paginated),
// "nolist": ["BUCKET/PREFIX" a signed ListObjectsV2 under which is 403
// AccessDenied, as an IAM policy without s3:ListBucket there answers],
// "region": the server's (default us-east-1; another in a request's
// scope: 400 AuthorizationHeaderMalformed), "moved": {BUCKET: REGION} (answered 301 PermanentRedirect), "log":
// FILE (one JSON line per request: method, url, verdict, signed headers)}.
// Prints "PORT" on stdout once serving; stops on SIGTERM.
//
// A signed request is answered as S3 would: an unknown key 403
// InvalidAccessKeyId, a session key without its token (or another) 403
// InvalidToken, x-amz-content-sha256 not among the signed headers 400
// InvalidRequest, a signature that is not the signer's 403
// SignatureDoesNotMatch; an unsigned request to a bucket not public 403
// AccessDenied.  Checked requests go on to s3rver unsigned (it does not
// check V4 signatures itself).
//
// s3rver 3.7.1 ciphers its listing continuation tokens with DES, which
// OpenSSL 3 lacks: crypto.createCipheriv/createDecipheriv are wrapped, for
// 'des' alone, to use AES-128-CBC with the key and IV doubled.
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const desToAes = (f) => (alg, key, iv, ...rest) =>
  alg === "des"
    ? f("aes-128-cbc", Buffer.concat([key, key]), Buffer.concat([iv, iv]), ...rest)
    : f(alg, key, iv, ...rest);
crypto.createCipheriv = desToAes(crypto.createCipheriv);
crypto.createDecipheriv = desToAes(crypto.createDecipheriv);

const mods = process.env.S3CHECK_MODULES;
const S3rver = require(path.join(mods, "s3rver"));
const { SignatureV4 } = require(path.join(mods, "@smithy/signature-v4"));
const { Sha256 } = require(path.join(mods, "@aws-crypto/sha256-js"));

const cfg = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const creds = cfg.creds || {};
const pub = new Set(cfg.public || []);
const moved = cfg.moved || {};
const logf = cfg.log ? fs.openSync(cfg.log, "a") : null;

function xmlError(res, status, code, message, extra = "", headers = {}) {
  res.writeHead(status, { "content-type": "application/xml", ...headers });
  res.end(`<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code>` +
          `<Message>${message}</Message>${extra}<RequestId>s3check</RequestId></Error>`);
}

function log(req, verdict, signed) {
  if (logf !== null)
    fs.writeSync(logf, JSON.stringify({ method: req.method, url: req.url, host: req.headers.host,
                                        verdict, signed }) + "\n");
}

const AUTH = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/;

function amzDate(v) {
  const m = /^(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)Z$/.exec(v || "");
  return m ? new Date(Date.UTC(+m[1], m[2] - 1, +m[3], +m[4], +m[5], +m[6])) : null;
}

// The query as the signer takes it: names to decoded values ("+" is a
// plus in S3's canonical form).
function queryOf(raw) {
  const q = {};
  for (const part of raw ? raw.split("&") : []) {
    const i = part.indexOf("=");
    const k = decodeURIComponent(i < 0 ? part : part.slice(0, i));
    const v = i < 0 ? "" : decodeURIComponent(part.slice(i + 1));
    q[k] = k in q ? [].concat(q[k], v) : v;
  }
  return q;
}

// The verdict on a signed request: null if good, else [status, code, message].
async function verify(req, m, sent) {
  const [, ak, , region, service, signedList, sig] = m;
  const c = creds[ak];
  if (!c) return [403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records."];
  const signed = signedList.split(";");
  if (region !== (cfg.region || "us-east-1"))
    return [400, "AuthorizationHeaderMalformed",
            `The authorization header is malformed; the region '${region}' is wrong; expecting '${cfg.region || "us-east-1"}'`];
  if (c.token && req.headers["x-amz-security-token"] !== c.token)
    return [403, "InvalidToken", "The provided token is malformed or otherwise invalid."];
  if (!signed.includes("x-amz-content-sha256"))
    return [400, "InvalidRequest", "Missing required header for this request: x-amz-content-sha256"];
  if (c.token && !signed.includes("x-amz-security-token"))
    return [403, "SignatureDoesNotMatch", "x-amz-security-token is not signed"];
  const headers = {};
  for (const h of signed) headers[h] = req.headers[h] ?? "";
  const [p, raw] = sent.split(/\?(.*)/s);
  const [host, port] = (req.headers.host || "").split(":");
  const signer = new SignatureV4({
    credentials: { accessKeyId: ak, secretAccessKey: c.secret, sessionToken: c.token },
    region, service, sha256: Sha256, uriEscapePath: false, applyChecksum: false,
  });
  const out = await signer.sign(
    { method: req.method, protocol: "http:", hostname: host, port: port ? +port : undefined,
      path: p, query: queryOf(raw), headers },
    { signingDate: amzDate(req.headers["x-amz-date"]), signableHeaders: new Set(signed) });
  const auth = out.headers.authorization || out.headers.Authorization || "";
  const want = /Signature=([0-9a-f]{64})/.exec(auth);
  if (!want || want[1] !== sig)
    return [403, "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided. Check your key and signing method."];
  return null;
}

// cfg.nolist's verdict on a listing: [403, "AccessDenied", ...] or null.
function listDenied(req, bucket) {
  const q = new URLSearchParams(req.url.split(/\?(.*)/s)[1] || "");
  if (q.get("list-type") !== "2") return null;
  const at = bucket + "/" + (q.get("prefix") || "");
  return (cfg.nolist || []).some((p) => at.startsWith(p)) ? [403, "AccessDenied", "Access Denied"] : null;
}

function forward(req, res, port) {
  const headers = { ...req.headers };
  for (const h of ["authorization", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"])
    delete headers[h];
  headers.host = `127.0.0.1:${port}`; // path-style to s3rver (no vhost of its own)
  let url = req.url;
  const [p, raw] = url.split(/\?(.*)/s);
  if (cfg.page && raw && /(^|&)list-type=2(&|$)/.test(raw))
    url = p + "?" + raw.split("&").filter((s) => !s.startsWith("max-keys=")).concat("max-keys=" + cfg.page).join("&");
  const up = http.request({ host: "127.0.0.1", port, method: req.method, path: url, headers }, (r) => {
    res.writeHead(r.statusCode, r.headers);
    r.pipe(res);
  });
  up.on("error", (e) => xmlError(res, 500, "InternalError", String(e)));
  req.pipe(up);
}

async function seed(port) {
  const root = cfg.seed;
  if (!root) return;
  const put = (bucket, key, file) => new Promise((ok, bad) => {
    // Streamed: a bench model passes node's 2 GiB limit of one Buffer.
    const r = http.request({ host: "127.0.0.1", port, method: "PUT",
                             path: "/" + bucket + "/" + key.split("/").map(encodeURIComponent).join("/"),
                             headers: { "content-length": fs.statSync(file).size } }, (res) => {
      res.resume();
      res.statusCode === 200 ? ok() : bad(new Error(`seed ${bucket}/${key}: HTTP ${res.statusCode}`));
    });
    r.on("error", bad);
    const body = fs.createReadStream(file);
    body.on("error", bad);
    body.pipe(r);
  });
  for (const bucket of fs.readdirSync(root)) {
    const walk = async (dir, pre) => {
      for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
        if (e.isDirectory()) await walk(path.join(dir, e.name), pre + e.name + "/");
        else await put(bucket, pre + e.name, path.join(dir, e.name));
      }
    };
    await walk(path.join(root, bucket), "");
  }
}

const buckets = cfg.seed ? fs.readdirSync(cfg.seed) : [];
const s3 = new S3rver({ port: 0, address: "127.0.0.1", silent: true, directory: cfg.dir,
                        configureBuckets: buckets.map((name) => ({ name })) });
const addr = await s3.run();
await seed(addr.port);

// A virtual-hosted request (Host: BUCKET.localhost[:PORT], as a client
// addresses a bucket by name; curl resolves *.localhost to loopback): its
// bucket, or null for a path-style one.
function vhostBucket(req) {
  const m = /^([a-z0-9][a-z0-9.-]*)\.localhost(:\d+)?$/.exec(req.headers.host || "");
  return m ? m[1] : null;
}

const server = http.createServer(async (req, res) => {
  try {
    // The signature covers the request as sent (verify); s3rver and the
    // rules below see it path-style.
    const vb = vhostBucket(req);
    const sent = req.url;
    if (vb !== null) req.url = "/" + vb + (req.url.startsWith("/") ? req.url : "/" + req.url);
    const bucket = decodeURIComponent(req.url.split("?")[0].split("/")[1] || "");
    const m = AUTH.exec(req.headers.authorization || "");
    if (moved[bucket]) {
      log(req, "PermanentRedirect", null);
      return xmlError(res, 301, "PermanentRedirect",
        "The bucket you are attempting to access must be addressed using the specified endpoint.",
        `<Bucket>${bucket}</Bucket><Endpoint>${bucket}.s3.${moved[bucket]}.amazonaws.com</Endpoint>`,
        { "x-amz-bucket-region": moved[bucket] });
    }
    if (!m) {
      if (req.headers.authorization || !pub.has(bucket)) {
        log(req, "AccessDenied", null);
        return xmlError(res, 403, "AccessDenied", "Access Denied");
      }
      log(req, "unsigned", null);
      return forward(req, res, addr.port);
    }
    const bad = (await verify(req, m, sent)) || listDenied(req, bucket);
    log(req, bad ? bad[1] : "ok", m[5]);
    if (bad) return xmlError(res, bad[0], bad[1], bad[2]);
    forward(req, res, addr.port);
  } catch (e) {
    xmlError(res, 500, "InternalError", String(e).replace(/[<&]/g, " "));
  }
});
server.listen(0, "127.0.0.1", () => process.stdout.write(server.address().port + "\n"));
process.on("SIGTERM", async () => {
  server.close();
  await s3.close();
  process.exit(0);
});
