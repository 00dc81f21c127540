#!/usr/bin/env python3
"""mount_s3: models in an S3 bucket, s3://BUCKET/KEY (issue 25).

A real S3 server on 127.0.0.1: s3rver (npm) behind tests/s3check.mjs,
which verifies every request's Signature V4 with AWS's own signer
(@smithy/signature-v4) and answers as S3 does.  Each model is mounted by
s3:// URL (AWS_ENDPOINT_URL: path style) and judged by ggml's reader
against the local copy, as mount_remote judges an https:// mount; then:
a wrong secret fails at mount naming SignatureDoesNotMatch; a missing
object NoSuchKey; a bucket elsewhere PermanentRedirect with its region;
a session key is honoured with its token (InvalidToken without it); a
public bucket is read unsigned; every signed request covered
x-amz-content-sha256; the secret is in no argument, mount line, log or
cache file; a shard set by key name; llama.cpp runs a model from the
bucket (skipped without node-llama-cpp).  A prefix is a store
(s3://BUCKET/PREFIX/): 50 models and a 3-shard set listed across pages
of 7 keys (the checker forces the page size), models.tsv as the test
laid them out and ggml reads them, a model's meta/ judged by ggml; an
empty prefix an empty store; a prefix the key may not list refused
naming the bucket, the prefix and AccessDenied.
Exit 0 pass, 1 fail, 77 skip (no FUSE, no node, no s3rver).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import judge as J  # noqa: E402
import mount_remote as R  # noqa: E402  (RemoteChecker, read_all, make_model)

Fail = J.Fail
KEY, SECRET = "AKIDTEST", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYtest"
TMP_KEY, TMP_SECRET, TOKEN = "ASIATEST", "tmpSecret/+x", "FwoGZXIvYXdzE-session-token"
EMPTY_SHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def modules():
    src = os.environ.get("GGUFS_SRCDIR", "")
    d = os.path.join(src, ".deps", "s3", "node_modules")
    if not src or not os.path.isdir(os.path.join(d, "s3rver")) or not shutil.which("node"):
        raise J.Skip("s3rver is not installed in %s (run dev/setup --tests)" % d)
    return d


class S3:
    """s3check.mjs with s3rver, seeded from seed/BUCKET/KEY files."""

    def __init__(self, tmp, seed, page=1000, nolist=()):
        self.log = os.path.join(tmp, "s3.log")
        cfg = {"dir": os.path.join(tmp, "s3data"), "seed": seed, "log": self.log, "page": page,
               "nolist": list(nolist),
               "creds": {KEY: {"secret": SECRET}, TMP_KEY: {"secret": TMP_SECRET, "token": TOKEN}},
               "public": ["pub"], "moved": {"far": "eu-west-1"}}
        path = os.path.join(tmp, "s3.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        env = dict(os.environ, S3CHECK_MODULES=modules())
        self.p = subprocess.Popen(["node", os.path.join(HERE, "s3check.mjs"), path], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env)
        line = self.p.stdout.readline().decode().strip()
        if not line.isdigit():
            self.p.kill()
            raise Fail("s3check did not start: %s" % self.p.stderr.read().decode(errors="replace")[-2000:])
        self.url = "http://127.0.0.1:%s" % line

    def lines(self):
        with open(self.log) as f:
            return [json.loads(ln) for ln in f]

    def stop(self):
        self.p.terminate()
        try:
            self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()


def creds(key=KEY, secret=SECRET, token=None):
    for v in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        os.environ.pop(v, None)
    if key:
        os.environ.update(AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret)
    if token:
        os.environ["AWS_SESSION_TOKEN"] = token


def judge(local, url, mnt, args):
    verdict, ref = J.refdump(local)
    if ref is None:
        raise Fail("%s: ggml rejects the local copy" % local)
    with J.Watchdog(mnt, 300, url):
        with J.Mounted(url, mnt, args=args):
            mi = J.mountinfo_entry(mnt)
            if mi is None or mi[1] != url:
                raise Fail("%s: mount source %r" % (url, mi and mi[1]))
            nk, nt = J.compare_mount(local, mnt, ref, J.walk_gguf(local), url, os.stat(local), True)
    J.log("ok   %s judged by ggml: %d keys, %d tensors" % (url, nk, nt))


def main():
    J.require_fuse()
    modules()
    tmp = tempfile.mkdtemp(prefix="ggufs-s3-", dir="/tmp")
    mnt = os.path.join(tmp, "mnt")
    s3 = None
    try:
        os.makedirs(mnt)
        seed = os.path.join(tmp, "seed")
        for b in ("models", "pub", "far", "store"):
            os.makedirs(os.path.join(seed, b, "team"))
        local = os.path.join(seed, "models", "team", "m.gguf")
        R.make_model(local, 1, 4)
        shutil.copy(local, os.path.join(seed, "pub", "m.gguf"))
        shutil.copy(local, os.path.join(seed, "far", "x.gguf"))
        p = subprocess.run([J.tool("MKSPLIT"), local, os.path.join(seed, "models", "set"), "3"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode != 0:
            raise Fail("mksplit: %s" % p.stderr.decode(errors="replace"))
        import mount_llama as L
        L.make_model(os.path.join(seed, "models", "team", "tiny-llama.gguf"))
        zoo = seed_store(os.path.join(seed, "store"), local)
        s3 = S3(tmp, seed, page=PAGE, nolist=["store/secret/"])
        os.environ["AWS_ENDPOINT_URL"] = s3.url
        os.environ.pop("AWS_PROFILE", None)
        # no shared files but the test's own (profiles())
        os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.path.join(tmp, "no-credentials")
        os.environ["AWS_CONFIG_FILE"] = os.path.join(tmp, "no-config")
        run(tmp, seed, local, mnt, s3, zoo)
    finally:
        if J.mountinfo_entry(mnt):
            J.unmount(mnt, [])
        if s3:
            s3.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def run(tmp, seed, local, mnt, s3, zoo):
    cache = ["-o", "cache=" + os.path.join(tmp, "cache")]
    creds()
    judge(local, "s3://models/team/m.gguf", mnt, cache)
    signed = [ln for ln in s3.lines() if ln["signed"]]
    if not signed or any(ln["verdict"] != "ok" or "x-amz-content-sha256" not in ln["signed"].split(";")
                         for ln in signed):
        raise Fail("signed requests not all good and covering x-amz-content-sha256: %s" % signed[:3])
    J.log("ok   %d signed requests, each covering x-amz-content-sha256" % len(signed))

    # the secret is nowhere to be seen
    with J.Mounted("s3://models/team/m.gguf", mnt, args=cache):
        pids = J._procs_for(mnt)
        shown = [open("/proc/%d/cmdline" % p, "rb").read() for p in pids]
        with open("/proc/self/mountinfo", "rb") as f:
            shown.append(f.read())
        shown.append(open(os.path.join(mnt, "meta.tsv"), "rb").read())
        shown += [os.getxattr(mnt, a) for a in os.listxattr(mnt)]
    for dp, dn, fn in os.walk(os.path.join(tmp, "cache")):
        for f in fn:
            with open(os.path.join(dp, f), "rb") as fh:
                shown.append(fh.read())
    if not pids or any(SECRET.encode() in b for b in shown):
        raise Fail("the secret shows in ps, mountinfo, xattrs or the cache (daemons %s)" % pids)
    J.log("ok   the secret is in no argument, mount line, xattr or cache file")

    # a shard set by key name
    with J.Mounted("s3://models/set-00001-of-00003.gguf", mnt, args=cache):
        got = R.read_all(mnt)
    if "set.gguf" not in got or len([k for k in got if k.startswith("tensors/")]) != 4:
        raise Fail("the shard set from the bucket: %s" % sorted(got)[:8])
    J.log("ok   a shard set by key name, merged")

    refusals(tmp, mnt, cache)
    virtual_hosted(tmp, local, mnt, s3)

    # a session's key with its token; without it, InvalidToken
    creds(TMP_KEY, TMP_SECRET, TOKEN)
    with J.Mounted("s3://models/team/m.gguf", mnt, args=cache + ["-o", "cache=" + tmp + "/c2"]):
        if open(os.path.join(mnt, "meta", "general.architecture")).read().strip() != "llama":
            raise Fail("session mount: general.architecture")
    if not any(ln["url"].startswith("/models/team") and ln["verdict"] == "ok"
               and "x-amz-security-token" in (ln["signed"] or "") for ln in s3.lines()):
        raise Fail("no request signed x-amz-security-token")
    J.log("ok   a session key with AWS_SESSION_TOKEN (signed)")
    creds(TMP_KEY, TMP_SECRET)
    refused("s3://models/team/m.gguf", mnt, cache, "InvalidToken")

    # a public bucket, unsigned
    creds(None)
    mark = len(s3.lines())
    judge(local, "s3://pub/m.gguf", mnt, ["-o", "cache=" + tmp + "/c3"])
    if any(ln["signed"] or ln["verdict"] != "unsigned" for ln in s3.lines()[mark:]):
        raise Fail("requests to a public bucket without credentials were not unsigned")
    refused("s3://models/team/m.gguf", mnt, cache, "AccessDenied")
    creds()
    profiles(tmp, mnt, cache, s3)
    creds()
    check_store(tmp, mnt, s3, zoo)
    hostile_listings(tmp, local, mnt)
    check_llama(tmp, seed, s3, mnt)


def virtual_hosted(tmp, local, mnt, s3):
    """-o s3_path_style=no with a custom endpoint: the bucket in the host
    name (http://models.localhost:PORT/team/m.gguf; curl resolves
    *.localhost to loopback), signed over that host; judged by ggml."""
    port = s3.url.rsplit(":", 1)[1]
    saved = os.environ["AWS_ENDPOINT_URL"]
    os.environ["AWS_ENDPOINT_URL"] = "http://localhost:" + port
    mark = len(s3.lines())
    try:
        judge(local, "s3://models/team/m.gguf", mnt,
              ["-o", "cache=" + os.path.join(tmp, "cvh"), "-o", "s3_path_style=no"])
    finally:
        os.environ["AWS_ENDPOINT_URL"] = saved
    got = s3.lines()[mark:]
    want_host = "models.localhost:" + port
    if not got or any(ln["host"] != want_host or not ln["url"].startswith("/models/team/m.gguf")
                      or ln["verdict"] != "ok" or not ln["signed"] for ln in got):
        raise Fail("virtual-hosted requests not all signed, good and to %s: %s" % (want_host, got[:3]))
    J.log("ok   virtual-hosted style (-o s3_path_style=no): %d signed requests to %s" % (len(got), want_host))


LAUGHS = ('<?xml version="1.0"?>\n<!DOCTYPE l [<!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">'
          + "".join('<!ENTITY %s "%s">' % (chr(98 + i), ("&%s;" % chr(97 + i)) * 10) for i in range(8))
          + ']>\n<ListBucketResult><Name>laughs</Name><IsTruncated>false</IsTruncated>'
          '<Contents><Key>&i;.gguf</Key><Size>1</Size></Contents></ListBucketResult>')


def _page(keys, token=None):
    """A ListBucketResult of (key, size) pairs (size a string: as given),
    truncated with NextContinuationToken token if given ("" for none)."""
    from xml.sax.saxutils import escape
    c = "".join("<Contents><Key>%s</Key><Size>%s</Size></Contents>" % (escape(k), z) for k, z in keys)
    t = ("<IsTruncated>true</IsTruncated>" + ("<NextContinuationToken>%s</NextContinuationToken>" % token
                                               if token else "")) if token is not None else \
        "<IsTruncated>false</IsTruncated>"
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult><Name>b</Name>%s%s</ListBucketResult>'
            % (t, c))


class Hostile:
    """A server on loopback that answers ListObjectsV2 as a hostile or
    broken S3 would, per bucket: pages[bucket][token or ""] is the body
    (a str; None: 404), and serves objects[(bucket, key)] (bytes, with
    Range) unsigned."""

    def __init__(self, pages, objects):
        import http.server
        import threading
        import urllib.parse
        hs = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                u = urllib.parse.urlsplit(self.path)
                bucket, _, key = u.path.lstrip("/").partition("/")
                key = urllib.parse.unquote(key)
                q = dict(urllib.parse.parse_qsl(u.query, keep_blank_values=True))
                hs.requests += 1
                if q.get("list-type") == "2":
                    body = pages.get(bucket, {}).get(q.get("continuation-token", ""))
                    if body is None:
                        return self.send_error(404)
                    b = body.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(b)))
                    self.end_headers()
                    return self.wfile.write(b)
                data = objects.get((bucket, key))
                if data is None:
                    return self.send_error(404)
                lo, hi = 0, len(data) - 1
                rng = self.headers.get("Range", "")
                if rng.startswith("bytes="):
                    a, _, z = rng[6:].partition("-")
                    lo, hi = int(a), min(int(z) if z else hi, hi)
                self.send_response(206 if rng else 200)
                self.send_header("ETag", '"e1"')
                self.send_header("Content-Length", str(hi - lo + 1))
                if rng:
                    self.send_header("Content-Range", "bytes %d-%d/%d" % (lo, hi, len(data)))
                self.end_headers()
                self.wfile.write(data[lo:hi + 1])

        self.requests = 0
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d" % self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


def hostile_listings(tmp, local, mnt):
    """Listing pages no S3 sends: each store mount is refused with one line
    naming s3://BUCKET/PREFIX/ and the fault, within a few requests (a
    token cycle too), or (hostile keys) mounts with only the good model."""
    with open(local, "rb") as f:
        model = f.read()
    good = [("pre/good.gguf", str(len(model)))]
    pages = {
        "cycle": {"": _page(good, "A"), "A": _page([], "B"), "B": _page([], "A")},
        "notoken": {"": _page(good, "")},
        "own": {"": _page(good, "A"), "A": _page([], "A")},
        "notxml": {"": "hello, not XML"},
        "other": {"": '<?xml version="1.0"?><Error><Code>Nope</Code></Error>'},
        "laughs": {"": LAUGHS},
        "dtd": {"": _page(good).replace("<ListBucketResult>", '<!DOCTYPE l [<!ENTITY k "pre/x">]><ListBucketResult>')
                .replace("pre/good.gguf", "&k;.gguf")},
        "longtok": {"": _page(good, "t" * 5000)},
        "keys": {"": _page(good + [("pre/../../etc/x.gguf", "1"), ("elsewhere/x.gguf", "1"),
                                   ("pre/q?x.gguf", "1"), ("pre/neg.gguf", "-5"), ("pre/nan.gguf", "many"),
                                   ("pre/.hidden/../x.gguf", "1")])},
    }
    objects = {("keys", "pre/good.gguf"): model}
    srv = Hostile(pages, objects)
    saved = os.environ["AWS_ENDPOINT_URL"]
    os.environ["AWS_ENDPOINT_URL"] = srv.url
    creds(None)
    args = ["-o", "ro,cache=" + os.path.join(tmp, "c-hostile")]
    try:
        for bucket, want in (("cycle", "given before"), ("notoken", "without a next continuation token"),
                             ("own", "its own"), ("notxml", "not a ListBucketResult"),
                             ("other", "not a ListBucketResult"), ("laughs", "not a ListBucketResult"),
                             ("dtd", "not a ListBucketResult"),
                             ("longtok", "without a next continuation token")):
            before = srv.requests
            refused("s3://%s/pre/" % bucket, mnt, args, ["page", want])
            if srv.requests - before > 4:
                raise Fail("s3://%s/pre/: %d requests before the refusal" % (bucket, srv.requests - before))
        url = "s3://keys/pre/"
        with J.Watchdog(mnt, 120, url), J.Mounted(url, mnt, args=args):
            with open(os.path.join(mnt, "models.tsv")) as f:
                names = [ln.split("\t")[0] for ln in f.read().splitlines()[1:]]
            if names != ["good"]:
                raise Fail("%s: models.tsv names %s, expected only good" % (url, names))
            with open(os.path.join(mnt, "good", "meta", "general.architecture")) as f:
                if f.read().strip() != "llama":
                    raise Fail("%s: good/meta/general.architecture" % url)
        J.log("ok   hostile listing pages refused in a few requests each; hostile keys skipped")
    finally:
        os.environ["AWS_ENDPOINT_URL"] = saved
        creds()
        srv.stop()


def profiles(tmp, mnt, cache, s3):
    """~/.aws/credentials and ~/.aws/config by AWS_PROFILE (the files named
    by AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE): keys, a session
    token, the region and the endpoint from them; the environment first;
    a file that is a symlink, another user's or writable by others is
    refused, naming it."""
    d = os.path.join(tmp, "aws")
    os.makedirs(d, exist_ok=True)
    cred, conf = os.path.join(d, "credentials"), os.path.join(d, "config")

    def put(path, text, mode=0o600):
        if os.path.lexists(path):
            os.unlink(path)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
    put(cred, "[default]\naws_access_key_id = WRONGKEY\naws_secret_access_key = wrong\n\n"
              "# the team's\n[team]\naws_access_key_id = %s\naws_secret_access_key=%s\n"
              "[sess]\naws_access_key_id = %s\naws_secret_access_key = %s\n"
              "aws_session_token = %s\n" % (KEY, SECRET, TMP_KEY, TMP_SECRET, TOKEN))
    put(conf, "[default]\nregion = us-east-1\n[profile team]\nregion = us-east-1\n"
              "endpoint_url = %s\n[profile sess]\nendpoint_url = %s\n"
              "[profile far]\nregion = eu-north-1\n" % (s3.url, s3.url))
    creds(None)
    endpoint = os.environ.pop("AWS_ENDPOINT_URL")
    os.environ.update(AWS_SHARED_CREDENTIALS_FILE=cred, AWS_CONFIG_FILE=conf)
    url = "s3://models/team/m.gguf"
    try:
        for prof in ("team", "sess"):
            os.environ["AWS_PROFILE"] = prof
            with J.Mounted(url, mnt, args=cache):
                if open(os.path.join(mnt, "meta", "general.architecture")).read().strip() != "llama":
                    raise Fail("profile %s: general.architecture" % prof)
        if not any(ln["verdict"] == "ok" and "x-amz-security-token" in (ln["signed"] or "")
                   for ln in s3.lines()):
            raise Fail("the profile's session token was not signed")
        J.log("ok   profiles team and sess: keys, token and endpoint from the shared files")
        # far: a region in the config, no keys (never the default's): unsigned
        os.environ["AWS_PROFILE"] = "far"
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        refused(url, mnt, cache, ["AccessDenied"])
        creds()  # the environment's keys come first
        refused(url, mnt, cache, ["AuthorizationHeaderMalformed", "eu-north-1"])
        os.environ["AWS_PROFILE"] = "team"
        creds(None)
        os.symlink(cred, cred + ".link")
        os.environ["AWS_SHARED_CREDENTIALS_FILE"] = cred + ".link"
        refused(url, mnt, cache, [cred + ".link", "symbolic link"])
        os.environ["AWS_SHARED_CREDENTIALS_FILE"] = cred
        os.chown(cred, 65534, 65534)
        refused(url, mnt, cache, [cred, "owned by uid 65534"])
        os.chown(cred, 0, 0)
        os.chmod(cred, 0o666)
        refused(url, mnt, cache, [cred, "writable by others"])
        os.chmod(cred, 0o600)
    finally:
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        os.environ.pop("AWS_PROFILE", None)
        os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.path.join(tmp, "no-credentials")
        os.environ["AWS_CONFIG_FILE"] = os.path.join(tmp, "no-config")


def refused(url, mnt, args, want):
    p = J.run_ggufs(list(args) + [url, mnt], timeout=120)
    err = p.stderr.decode(errors="replace").strip()
    wants = [want] if isinstance(want, str) else want
    if p.returncode != 1 or len(err.splitlines()) != 1 or url not in err or any(w not in err for w in wants):
        if J.mountinfo_entry(mnt):
            J.unmount(mnt, [])
        raise Fail("%s: expected exit 1 and one line naming it and %s, got %d: %r" % (url, wants, p.returncode, err))
    J.log("ok   %s refused: %s" % (url, err))


def refusals(tmp, mnt, cache):
    creds(KEY, "not-the-secret")
    refused("s3://models/team/m.gguf", mnt, cache, "SignatureDoesNotMatch")
    creds()
    refused("s3://models/team/none.gguf", mnt, cache, "NoSuchKey")
    refused("s3://far/x.gguf", mnt, cache, ["PermanentRedirect", "eu-west-1"])
    creds(None)
    os.environ["AWS_ACCESS_KEY_ID"] = KEY
    refused("s3://models/team/m.gguf", mnt, cache, "AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY")
    creds()
    os.environ["AWS_REGION"] = "eu-north-1"  # signed for another region
    refused("s3://models/team/m.gguf", mnt, cache, ["AuthorizationHeaderMalformed", "eu-north-1"])
    del os.environ["AWS_REGION"]


PAGE = 7  # keys per listing page: 50 models, a set and a README span 8


def seed_store(d, local):
    """store/zoo/: 50 models (five kinds, m00..m49, ten under sub/), a
    3-shard set and a README; store/secret/x.gguf (not listable);
    store/void/ holds nothing.  [(name, [files], [refs])]."""
    kinds = []
    for k in range(5):
        path = os.path.join(d, "kind%d.gguf" % k)
        R.make_model(path, 1, k + 1)
        kinds.append((path, J.refdump(path)[1]))
    zoo, models = os.path.join(d, "zoo"), []
    os.makedirs(os.path.join(zoo, "sub"))
    for i in range(50):
        name = ("sub/m%02d" if i >= 40 else "m%02d") % i
        path = os.path.join(zoo, name + ".gguf")
        shutil.copy(kinds[i % 5][0], path)
        models.append((name, [path], [kinds[i % 5][1]]))
    p = subprocess.run([J.tool("MKSPLIT"), local, os.path.join(zoo, "big"), "3"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Fail("mksplit: %s" % p.stderr.decode(errors="replace"))
    shards = [os.path.join(zoo, "big-%05d-of-00003.gguf" % i) for i in (1, 2, 3)]
    models.append(("big", shards, [J.refdump(f)[1] for f in shards]))
    with open(os.path.join(zoo, "README.md"), "w") as f:
        f.write("not a model\n")
    os.makedirs(os.path.join(d, "secret"))
    shutil.copy(local, os.path.join(d, "secret", "x.gguf"))
    for k in range(5):
        os.unlink(kinds[k][0])
    return models


def check_store(tmp, mnt, s3, zoo):
    """s3://store/zoo/ as a store: listed across pages, models.tsv, meta/
    judged by ggml; an empty prefix; a prefix the key cannot list."""
    import mount_stores as S
    cache = ["-o", "ro,cache=" + os.path.join(tmp, "c-store")]
    url = "s3://store/zoo/"
    mark = len(s3.lines())
    with J.Watchdog(mnt, 300, url), J.Mounted(url, mnt, args=cache):
        S.check_listing(mnt, [n for n, _, _ in zoo], url)
        lists = [ln for ln in s3.lines()[mark:] if "list-type=2" in ln["url"]]
        if len(lists) < (len(zoo) + 2) // PAGE or any(ln["verdict"] != "ok" for ln in lists):
            raise Fail("%s: %d listing requests (pages of %d), verdicts %s"
                       % (url, len(lists), PAGE, [ln["verdict"] for ln in lists]))
        with open(os.path.join(mnt, "models.tsv")) as f:
            rows = {ln.split("\t")[0]: ln.split("\t") for ln in f.read().splitlines()[1:]}
        src = {n: "s3://store/zoo/%s%s" % (n.rsplit("/", 1)[0] + "/" if "/" in n else "", os.path.basename(fs[0]))
               for n, fs, _ in zoo}
        for n, fs, refs in zoo:
            r = rows.get(n)
            want = (S.kv_of(refs[0], b"general.architecture"), sum(os.path.getsize(f) for f in fs),
                    sum(len(x.tensors) for x in refs), src[n])
            if not r or len(r) != 8 or (r[1], int(r[4]), int(r[6]), r[7]) != want:
                raise Fail("%s: models.tsv %s: %r, expected architecture, size, tensors, source %r"
                           % (url, n, r, want))
        if len(rows) != len(zoo):
            raise Fail("%s: models.tsv has %d models, the test put %d" % (url, len(rows), len(zoo)))
        for n in ("m07", "sub/m42"):
            f = [fs[0] for m, fs, _ in zoo if m == n][0]
            J.compare_mount(f, mnt, J.refdump(f)[1], J.walk_gguf(f), "%s: %s" % (url, n), os.stat(f), True,
                            root=os.path.join(mnt, n), live_name=S.live_name(n))
        got = R.read_all(os.path.join(mnt, "big"))
        if "big.gguf" not in got or len([k for k in got if k.startswith("tensors/")]) != 4:
            raise Fail("%s: the shard set big: %s" % (url, sorted(got)[:8]))
    J.log("ok   %s: %d models and a 3-shard set listed in %d pages of %d keys, models.tsv right, meta/ "
          "judged by ggml" % (url, len(zoo) - 1, len(lists), PAGE))
    with J.Mounted("s3://store/void/", mnt, args=cache):
        got = set(os.listdir(mnt))
        with open(os.path.join(mnt, "models.tsv")) as f:
            lines = f.read().splitlines()
    if got != {"models.tsv"} or len(lines) != 1:
        raise Fail("s3://store/void/ (an empty prefix) lists %s, models.tsv %r" % (sorted(got), lines))
    J.log("ok   s3://store/void/: an empty prefix, an empty store")
    refused("s3://store/secret/", mnt, cache, ["AccessDenied", "s3://store/secret/"])


def check_llama(tmp, seed, s3, mnt):
    try:
        import mount_llama as L
        mods = L.node_modules()
    except J.Skip as e:
        J.log("note: llama.cpp part skipped: %s" % e)
        return
    model = os.path.join(seed, "models", "team", "tiny-llama.gguf")  # seeded at start
    base = L.evaluate(mods, model, "local file")
    with J.Watchdog(mnt, 300, "llama s3"):
        with J.Mounted("s3://models/team/tiny-llama.gguf", mnt, args=["-o", "cache=" + tmp + "/c-llama"]):
            got = L.evaluate(mods, os.path.join(mnt, "tiny-llama.gguf"), "s3 live view")
    if not L.same_math(got, base):
        raise Fail("llama.cpp from the bucket generates %s, from the local file %s" % (got["tokens"], base["tokens"]))
    J.log("ok   llama.cpp runs a model from the bucket: the same greedy tokens and probabilities")


if __name__ == "__main__":
    J.main(main)
