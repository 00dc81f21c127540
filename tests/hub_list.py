#!/usr/bin/env python3
"""hub_list: a Hub repo's GGUF files, listed by the Hub's tree API (issue
23, catalog/hub.c through tests/hublist).

nginx (Debian's nginx-light, tests/webserver.py) on 127.0.0.1 serves
/api/models/OWNER/REPO/tree/REV?recursive=true as the Hub does: a JSON
array per page, the next page named by a Link header (rel="next", with a
cursor parameter), HF_TOKEN required.  Pages are static files chosen by
the cursor (try_files), Link values by a map on the file found.
Checked: three pages (an absolute next link, then a relative one among
other links with quoted params), shard sets grouped and a set missing a
shard left out, subfolders, LFS sizes, a name that needs escaping, the
NAME@model rule, a revision (a commit hash, refs/pr/1), HF_TOKEN and
-o header=FILE's headers sent with every page; then hostile answers: a
next link to another origin (refused, nothing sent there), a page that is
not JSON, not an array, larger than 16 MiB, of more than 2^18 values
(the parsed tree's memory), a 404 repo, a next page that
is itself, a cycle of pages (the bound: 1000 pages), entries of the wrong
shape and paths with "..", absolute or empty components (skipped, one log
line each naming the URL).  Finally every listed file opens with today's
hf:// machinery (rmt_open, /OWNER/REPO/resolve/REV/PATH with Range) and
is the GGUF it was listed as.  A server of our own answers a page 503,
then 429, then 200: the page is retried after the backoffs.
Exit 0 pass, 1 fail, 77 skip (no nginx).
"""

import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import judge as J  # noqa: E402
import webserver as W  # noqa: E402

Fail = J.Fail
HEX = "0123456789abcdef0123456789abcdef01234567"

LOCATIONS = """
    location /api/models/ {{
      if ($http_authorization != "Bearer hftok") {{ return 401; }}
      if ($arg_recursive != "true") {{ return 400; }}
      default_type application/json;
      add_header Link $hublink always;
      try_files /pages$uri/c$arg_cursor.json =404;
    }}
    location /o/r/resolve/ {{
      if ($http_authorization != "Bearer hftok") {{ return 401; }}
      rewrite ^/o/r/resolve/(main|%s|refs/pr/1)/(.*)$ /files/$1/$2 break;
      return 404;
    }}
""" % HEX


def make_model(path, mb=1, n=2):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    p = subprocess.run([J.tool("MKFIXTURE"), "model", path, "--tensor-mb", str(mb), "--n-tensors", str(n)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Fail("mkfixture model failed: %s" % p.stderr.decode(errors="replace"))
    return os.path.getsize(path)


def lfs(path, size):
    """A file entry as the Hub lists an LFS file: the top-level size is the
    pointer's, the file's is lfs.size."""
    return {"type": "file", "oid": "1" * 40, "size": 135, "path": path,
            "lfs": {"oid": "2" * 64, "size": size, "pointerSize": 135}}


def plain(path, size):
    return {"type": "file", "oid": "3" * 40, "size": size, "path": path}


class Hub:
    """The pages of each repo (www/pages/api/models/O/R/tree/REV/cCURSOR.json)
    and the Link header of each (the map)."""

    def __init__(self, www):
        self.www, self.links = www, []

    def page(self, repo, rev, cursor, body, link=None):
        d = os.path.join(self.www, "pages", "api", "models", repo, "tree", rev)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "c%s.json" % cursor), "w") as f:
            f.write(body if not isinstance(body, list) else json.dumps(body))
        if link:
            self.links.append('"/pages/api/models/%s/tree/%s/c%s.json" \'%s\';' % (repo, rev, cursor, link))

    def http(self):
        """The Link of each page, by the file try_files found ($uri is the
        file's path by the time add_header is evaluated)."""
        return ("map $uri $hublink {{\n  default \"\";\n  %s\n}}\n" % "\n  ".join(self.links))


def nxt(repo, cursor, host="127.0.0.1", rel="next"):
    return '<http://%s:{port}/api/models/%s/tree/main?recursive=true%s>; rel="%s"' % (
        host, repo, "&cursor=" + cursor if cursor else "", rel)


def main():
    if not W.exe():
        raise J.Skip("nginx is not installed (dev/setup --tests installs nginx-light)")
    tmp = tempfile.mkdtemp(prefix="ggufs-hub-", dir="/tmp")
    os.chmod(tmp, 0o755)
    ngx = None
    try:
        www = os.path.join(tmp, "www")
        hub = Hub(www)
        expect = build(tmp, www, hub)
        ngx = W.Nginx(os.path.join(tmp, "nginx"), www, LOCATIONS, http=hub.http())
        run(tmp, ngx, expect)
        flaky()
    finally:
        if ngx:
            ngx.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def build(tmp, www, hub):
    """The repos' pages and files; the expected listing of o/r (by hand:
    model, file name, size, URL)."""
    files = os.path.join(www, "files", "main")
    sizes = {}
    for rel in ("sub/a-Q4_K_M.gguf", "sub/deeper/x.gguf", "top.gguf", "top/inner.gguf",
                "weird name @ +%.gguf"):
        sizes[rel] = make_model(os.path.join(files, rel))
    whole = os.path.join(tmp, "whole.gguf")
    make_model(whole, 1, 3)
    p = subprocess.run([J.tool("MKSPLIT"), whole, os.path.join(files, "big"), "3"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        raise Fail("mksplit failed: %s" % p.stderr.decode(errors="replace"))
    for k in (1, 2, 3):
        rel = "big-%05d-of-00003.gguf" % k
        sizes[rel] = os.path.getsize(os.path.join(files, rel))
    d = {"type": "directory", "oid": "4" * 40, "size": 0}
    hub.page("o/r", "main", "", [
        plain(".gitattributes", 1519), dict(d, path="sub"), lfs("sub/a-Q4_K_M.gguf", sizes["sub/a-Q4_K_M.gguf"]),
        lfs("big-00001-of-00003.gguf", sizes["big-00001-of-00003.gguf"]), plain("README.md", 20)],
        nxt("o/r", "p2"))
    hostile = [42, {"type": "file"}, {"type": 1, "path": "x.gguf", "size": 1},
               plain("../evil.gguf", 1), plain("/abs.gguf", 1), plain("sub//b.gguf", 1),
               plain("sub/./c.gguf", 1), plain("neg.gguf", -1), {"type": "file", "path": "str.gguf", "size": "9"}]
    hub.page("o/r", "main", "p2", [
        lfs("big-00002-of-00003.gguf", sizes["big-00002-of-00003.gguf"]),
        lfs("broken-00001-of-00002.gguf", 100), dict(d, path="sub/deeper")] + hostile + [
        lfs("big-00003-of-00003.gguf", sizes["big-00003-of-00003.gguf"])],
        '</api/models/o/r/tree/main?recursive=true&cursor=p3>; title="a, <b>; rel=next"; rel="next", '
        + nxt("o/r", "", rel="first"))
    hub.page("o/r", "main", "p3", [
        plain("top.gguf", sizes["top.gguf"]), lfs("sub/deeper/x.gguf", sizes["sub/deeper/x.gguf"]),
        plain("top/inner.gguf", sizes["top/inner.gguf"]),
        lfs("weird name @ +%.gguf", sizes["weird name @ +%.gguf"])], nxt("o/r", "p2", rel="prev"))
    u = "hf://o/r/%s@main"
    expect = [("big", "big-%05d-of-00003.gguf" % k, sizes["big-%05d-of-00003.gguf" % k],
               u % ("big-%05d-of-00003.gguf" % k)) for k in (1, 2, 3)]
    expect += [("sub/a-Q4_K_M", "a-Q4_K_M.gguf", sizes["sub/a-Q4_K_M.gguf"], u % "sub/a-Q4_K_M.gguf"),
               ("sub/deeper/x", "x.gguf", sizes["sub/deeper/x.gguf"], u % "sub/deeper/x.gguf"),
               ("top/inner", "inner.gguf", sizes["top/inner.gguf"], u % "top/inner.gguf"),
               ("top@model", "top.gguf", sizes["top.gguf"], u % "top.gguf"),
               ("weird name @ +%", "weird name @ +%.gguf", sizes["weird name @ +%.gguf"],
                u % "weird%20name%20%40%20%2B%25.gguf")]
    # a revision: a commit hash, and refs/pr/1 (one path segment in the API)
    for rev in (HEX, "refs/pr/1"):
        size = make_model(os.path.join(www, "files", rev, "sub", "m.gguf"))
        hub.page("o/r", rev, "", [lfs("sub/m.gguf", size), plain("sub/notes.txt", 3)])
        expect.append(("@" + rev, "sub/m", "m.gguf", size, "hf://o/r/sub/m.gguf@" + rev))
    # hostile repos
    hub.page("o/xo", "main", "", [plain("a.gguf", 1)], nxt("o/xo", "p2", host="localhost"))
    hub.page("o/xo", "main", "p2", [plain("b.gguf", 1)])
    hub.page("o/nj", "main", "", [plain("a.gguf", 1)], nxt("o/nj", "p2"))
    hub.page("o/nj", "main", "p2", "<html>rate limited</html>")
    hub.page("o/obj", "main", "", '{"error": "Repository not found"}')
    hub.page("o/self", "main", "", [], nxt("o/self", ""))
    hub.page("o/loop", "main", "", [], nxt("o/loop", "a"))
    hub.page("o/loop", "main", "a", [plain("a.gguf", 1)], nxt("o/loop", "b"))
    hub.page("o/loop", "main", "b", [], nxt("o/loop", "a"))
    hub.page("o/big", "main", "", "[" + " " * (16 << 20) + "]")
    hub.page("o/many", "main", "", "[" + "0," * 300000 + "0]")
    return expect


def hublist(ngx, url, *args, env=None, ok=True):
    e = dict(os.environ, HF_TOKEN="hftok")
    if ngx:
        e["HF_ENDPOINT"] = "http://127.0.0.1:%d" % ngx.port
    e.update(env or {})
    p = subprocess.run([J.tool("HUBLIST")] + list(args) + [url], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=e, timeout=120)
    out, err = p.stdout.decode(), p.stderr.decode()
    if ok and p.returncode != 0:
        raise Fail("hublist %s: exit %d: %s" % (url, p.returncode, err))
    if not ok and p.returncode != 1:
        raise Fail("hublist %s: exit %d, expected 1: %s %s" % (url, p.returncode, out, err))
    return out, err


def api_lines(ngx, mark, repo):
    """The page requests of repo (nginx logs $uri: the page's file by then)."""
    return [ln for ln in ngx.log_since(mark) if "/api/models/%s/" % repo in ln.split(" ")[1]]


def run(tmp, ngx, expect):
    api = "http://127.0.0.1:%d/api/models/" % ngx.port
    main_rows = [e for e in expect if e[0] != "@" + HEX and e[0] != "@refs/pr/1"]
    # 1. three pages, shard sets, subfolders, LFS sizes, escaping, NAME@model
    mark = ngx.log_mark()
    out, err = hublist(ngx, "hf://o/r")
    if "not a repo URL" in err:
        raise Fail("cat_hub_is_repo says hf://o/r is not a repo")
    rows = [tuple(ln.split("\t")) for ln in out.splitlines()]
    want = [(m, n, str(s), u) for m, n, s, u in main_rows]
    if rows != want:
        raise Fail("hf://o/r listed\n  %s\nexpected\n  %s" % ("\n  ".join(map(str, rows)),
                                                            "\n  ".join(map(str, want))))
    reqs = api_lines(ngx, mark, "o/r")
    if len(reqs) != 3 or any(" 200 " not in ln or '"Bearer hftok"' not in ln for ln in reqs):
        raise Fail("expected 3 page requests, each 200 with HF_TOKEN: %s" % reqs)
    logs = [ln for ln in err.splitlines() if ln.startswith("log: ")]
    skipped = [ln for ln in logs if "page 2, entry" in ln and ln.endswith("skipped")]
    if len(skipped) != 9 or any(api + "o/r/tree/main" not in ln for ln in skipped):
        raise Fail("expected 9 skipped entries, each naming the API URL: %s" % logs)
    for what in ("../evil.gguf", "/abs.gguf", "sub//b.gguf", "sub/./c.gguf", "neg.gguf", "str.gguf"):
        if not any(what in ln for ln in skipped):
            raise Fail("no log line names %s: %s" % (what, skipped))
    if not any("broken" in ln and "left out" in ln for ln in logs):
        raise Fail("the set missing a shard is not logged: %s" % logs)
    J.log("ok   hf://o/r: 3 pages (HF_TOKEN on each), %d models, shard set grouped, the one missing a shard "
          "left out, 9 hostile entries skipped with one line each" % len(set(r[0] for r in rows)))

    # 2. -o header=FILE's headers go with every page
    hdr = os.path.join(tmp, "headers")
    with open(hdr, "w") as f:
        f.write("X-Secret: yes\n")
    mark = ngx.log_mark()
    hublist(ngx, "hf://o/r", "--header", hdr)
    reqs = api_lines(ngx, mark, "o/r")
    if len(reqs) != 3 or any('"yes"' not in ln for ln in reqs):
        raise Fail("the header file's header is not on every page: %s" % reqs)
    J.log("ok   -o header=FILE's headers sent with every page")

    # 3. revisions
    for rev in (HEX, "refs/pr/1"):
        out, err = hublist(ngx, "hf://o/r@" + rev, "--open", env={"HUBLIST_CACHE": os.path.join(tmp, "cache")})
        want = ["%s\t%s\t%d\t%s" % e[1:] for e in expect if e[0] == "@" + rev]
        got = [ln for ln in out.splitlines() if not ln.startswith("open\t")]
        opened = [ln for ln in out.splitlines() if ln.startswith("open\t")]
        size = want[0].split("\t")[2]
        if got != want or opened != ["open\thf://o/r/sub/m.gguf@%s\t%s\tGGUF" % (rev, size)]:
            raise Fail("hf://o/r@%s: %s, expected %s and it opened" % (rev, out, want))
    J.log("ok   revisions (a commit hash, refs/pr/1): listed at the revision, opened there")

    # 4. every file of o/r opens with today's hf:// machinery, its size the listed one
    mark = ngx.log_mark()
    out, err = hublist(ngx, "hf://o/r", "--open", env={"HUBLIST_CACHE": os.path.join(tmp, "cache")})
    opened = [ln.split("\t") for ln in out.splitlines() if ln.startswith("open\t")]
    want = [["open", u, str(s), "GGUF"] for m, n, s, u in main_rows]
    if opened != want:
        raise Fail("opening the listed files:\n  %s\nexpected\n  %s" % (opened, want))
    res = [ln for ln in ngx.log_since(mark) if " /files/" in ln]  # $uri: rewritten by then
    if not res or any('"Bearer hftok"' not in ln or (" 206 " not in ln and " 200 " not in ln) for ln in res):
        raise Fail("resolve requests without HF_TOKEN or failed: %s" % res)
    J.log("ok   all %d listed files opened as hf:// files (%d resolve requests, HF_TOKEN on each)"
          % (len(opened), len(res)))

    # 5. hostile answers: one line naming the URL, exit 1
    cases = [("o/xo", "another origin"), ("o/nj", "page 2 is not JSON"), ("o/obj", "page 1 is not a JSON array"),
             ("o/missing", "HTTP 404 (not found)"), ("o/self", "page 1's next page is itself"),
             ("o/loop", "more than 1000 pages"), ("o/big", "larger than 16777216 bytes"),
             ("o/many", "page 1 has more than 262144 JSON values")]
    for repo, what in cases:
        mark = ngx.log_mark()
        out, err = hublist(ngx, "hf://" + repo, ok=False)
        lines = [ln for ln in err.splitlines() if not ln.startswith("log: ")]
        if out or len(lines) != 1 or what not in lines[0] or api + repo + "/tree/main" not in lines[0]:
            raise Fail("hf://%s: expected one line naming the URL and '%s', got %r %r" % (repo, what, out, err))
        reqs = ngx.log_since(mark)
        if repo == "o/xo" and (len(reqs) != 1 or any(ln.endswith(" localhost") for ln in reqs)):
            raise Fail("hf://o/xo: a request went to the other origin: %s" % reqs)
        if repo == "o/loop" and len(reqs) != 1000:
            raise Fail("hf://o/loop: %d page requests, expected the bound, 1000" % len(reqs))
        J.log("ok   hf://%s: %s (%d requests)" % (repo, lines[0], len(reqs)))

    # 6. what is not hf://OWNER/REPO[@REV] is not a repo: no request
    mark = ngx.log_mark()
    for url in ("hf://o/r/x.gguf", "hf://o/r@a@b", "hf://../r", "hf://o/r@", "hf://o/r/", "hf://o",
                "hf://o/r%2F..", "hf://o/r@x\ty"):
        out, err = hublist(ngx, url, ok=False)
        if "log: not a repo URL" not in err or "not hf://OWNER/REPO[@REVISION]" not in err:
            raise Fail("%r was taken as a repo: %r" % (url, err))
    if ngx.log_since(mark):
        raise Fail("requests sent for URLs that are not repos: %s" % ngx.log_since(mark))
    J.log("ok   8 URLs that are not hf://OWNER/REPO[@REVISION] refused without a request")


class Flaky(http.server.BaseHTTPRequestHandler):
    """A listing page answered 503, then 429, then 200: the listing's
    requests are retried as a file's are."""
    answers = [503, 429]

    def log_message(self, *a):
        pass

    def do_GET(self):
        code = Flaky.answers.pop(0) if Flaky.answers else 200
        body = json.dumps([plain("m.gguf", 7)]).encode() if code == 200 else b"busy"
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def flaky():
    srv = http.server.HTTPServer(("127.0.0.1", 0), Flaky)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        e = {"HF_ENDPOINT": "http://127.0.0.1:%d" % srv.server_address[1]}
        t0 = time.time()
        out, err = hublist(None, "hf://o/flaky", env=e)
        dt = time.time() - t0
    finally:
        srv.shutdown()
        srv.server_close()
    if out != "m\tm.gguf\t7\thf://o/flaky/m.gguf@main\n" or Flaky.answers or dt < 1.4:
        raise Fail("a page answered 503, 429, 200: %r %r in %.2f s" % (out, err, dt))
    J.log("ok   a page answered 503, 429, then 200: listed after the backoffs (%.2f s)" % dt)


if __name__ == "__main__":
    J.main(main)
