"""A small HTTP server that misbehaves on purpose (tests/mount_remote.py).

URLs are /MODE/NAME for a file NAME of the served directory:
  drop     every other ranged answer is cut mid-body (the connection closed)
  503      the first two ranged requests get 503, then it serves
  norange  ignores Range: 200 and the whole file
  change   serves the file until .changed is set, then another version
           (other bytes, other ETag) that honours If-Match like a real one
  signed   redirects to /sig/GEN/NAME, a "signed URL" valid while GEN is
           .sig_gen (else 403, as an expired one); .resolves counts
           the redirects given, .sig_ranges the byte ranges (A, B) served
           through a valid one
  stall    once .stall is set, ranged requests get their headers and then
           no byte (until .stall is cleared)
  nohead   HEAD gets 405 (Method Not Allowed); GET serves
  getonly  HEAD gets 403, as an object store's URL signed for GET only
Hostile answers (issue 20), honest until .evil is set:
  shifted  206 with the bytes of 0-(B-A) and Content-Range "bytes 0-(B-A)/SIZE"
           for a request of A-B (a CDN that aligns ranges)
  gzip     206 of the range asked, gzip-compressed, Content-Encoding: gzip
  overlong 206 of the range asked without Content-Length, then 100 bytes
           more in a later packet, then the connection closed
  trickle  206 headers, then the body at 8 KiB/s
Versions without validators (issue 20):
  proxy    once .changed is set: another version (other bytes), no ETag,
           If-Match ignored (a proxy that drops both)
  proxylm  HEAD and 206 send Last-Modified only; once .changed is set:
           another version, no Last-Modified, If-Unmodified-Since ignored
  claim    the file is said to be CLAIM bytes longer than it is (HEAD and
           Content-Range); bytes past its end read as zeros
Otherwise HEAD answers with Content-Length, a strong ETag, Last-Modified and
Accept-Ranges.  .faults counts the faults injected.
"""
import email.utils
import gzip
import http.server
import os
import re
import socket
import threading
import time


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def setup(self):
        http.server.BaseHTTPRequestHandler.setup(self)
        with self.server.ctl.lock:
            self.server.ctl.conns.add(self.connection)

    def _signed(self):
        """Handles /signed/ and /sig/GEN/ paths; True if answered."""
        ctl = self.server.ctl
        m = re.match(r"^/signed/(.+)$", self.path)
        if m:
            ctl.resolves += 1
            self.send_response(302)
            self.send_header("Location", "/sig/%d/%s" % (ctl.sig_gen, m.group(1)))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return True
        m = re.match(r"^/sig/(\d+)/(.+)$", self.path)
        if m and int(m.group(1)) != ctl.sig_gen:
            self._empty(403)
            return True
        if m:
            self.path = "/sig/" + m.group(2)
            rng = re.match(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
            if rng:
                with ctl.lock:
                    ctl.sig_ranges.append((int(rng.group(1)), int(rng.group(2))))
        return False

    def _file(self):
        m = re.match(r"^/([a-z0-9]+)/(.+)$", self.path)
        if not m:
            return None, None, None
        mode, name = m.group(1), m.group(2)
        p = os.path.join(self.server.root, os.path.basename(name))
        try:
            data = open(p, "rb").read()
        except OSError:
            return mode, None, None
        etag = '"v1-%d"' % len(data)
        if mode in ("change", "proxy", "proxylm") and self.server.ctl.changed:
            data = bytes(b ^ 0x5a for b in data)
            etag = '"v2-%d"' % len(data)
        if mode == "claim":
            data = _Claimed(data, CLAIM)
            etag = '"claim-%d"' % len(data)
        return mode, data, etag

    def _headers(self, code, n, etag, extra=(), mode=""):
        changed = self.server.ctl.changed
        self.send_response(code)
        if n is not None:
            self.send_header("Content-Length", str(n))
        if not (mode == "proxylm" or (mode == "proxy" and changed)):
            self.send_header("ETag", etag)
        if not (mode == "proxylm" and changed):
            self.send_header("Last-Modified", email.utils.formatdate(1700000000, usegmt=True))
        self.send_header("Accept-Ranges", "bytes")
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()

    def _empty(self, code):
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _start(self):
        """Common to HEAD and GET: (mode, data, etag), or None if
        answered already (a redirect, a 403, a 404)."""
        if self._signed():
            return None
        mode, data, etag = self._file()
        if data is None:
            self._empty(404)
            return None
        return mode, data, etag

    def do_HEAD(self):
        f = self._start()
        if f and f[0] in ("nohead", "getonly"):
            self._empty(405 if f[0] == "nohead" else 403)
        elif f:
            self._headers(200, len(f[1]), f[2], mode=f[0])

    def do_GET(self):
        ctl = self.server.ctl
        f = self._start()
        if not f:
            return
        mode, data, etag = f
        rng = re.match(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        if mode == "norange" or not rng:
            self._headers(200, len(data), etag)
            self.wfile.write(data)
            return
        im = self.headers.get("If-Match")
        if im is not None and im != etag and mode != "proxy":
            self._empty(412)
            return
        a, b = int(rng.group(1)), min(int(rng.group(2)), len(data) - 1)
        body = data[a:b + 1]
        if ctl.evil and self._hostile(mode, data, etag, a, b, body):
            return
        with ctl.lock:
            ctl.n += 1
            n = ctl.n
        if mode == "503" and n <= 2:
            ctl.faults += 1
            self._empty(503)
            return
        cr = [("Content-Range", "bytes %d-%d/%d" % (a, b, len(data)))]
        if mode == "drop" and n % 2 == 1 and len(body) > 1:
            ctl.faults += 1
            self._headers(206, len(body), etag, cr)
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        if mode == "stall" and ctl.stall:
            ctl.faults += 1
            self._headers(206, len(body), etag, cr)
            self.wfile.flush()
            while ctl.stall and not ctl.stopping:
                time.sleep(0.05)
            self.close_connection = True
            return
        self._headers(206, len(body), etag, cr, mode=mode)
        self.wfile.write(body)

    def _hostile(self, mode, data, etag, a, b, body):
        """The hostile answers to a request of bytes a-b; True if answered."""
        ctl = self.server.ctl
        size = len(data)
        if mode == "shifted":
            ctl.faults += 1
            cr = [("Content-Range", "bytes 0-%d/%d" % (b - a, size))]
            self._headers(206, b - a + 1, etag, cr)
            self.wfile.write(data[0:b - a + 1])
            return True
        if mode == "gzip":
            ctl.faults += 1
            z = gzip.compress(body)
            cr = [("Content-Range", "bytes %d-%d/%d" % (a, b, size)), ("Content-Encoding", "gzip")]
            self._headers(206, len(z), etag, cr)
            self.wfile.write(z)
            return True
        cr = [("Content-Range", "bytes %d-%d/%d" % (a, b, size)), ("Connection", "close")]
        if mode == "overlong":
            ctl.faults += 1
            self._headers(206, None, etag, cr)
            self.wfile.write(body)
            self.wfile.flush()
            time.sleep(0.05)
            self.wfile.write(b"\xee" * 100)
            self.wfile.flush()
            self.close_connection = True
            return True
        if mode == "trickle":
            ctl.faults += 1
            self._headers(206, len(body), etag, cr)
            try:
                for i in range(0, len(body), 4096):
                    if ctl.stopping:
                        break
                    self.wfile.write(body[i:i + 4096])
                    self.wfile.flush()
                    time.sleep(0.5)
            except OSError:
                pass
            self.close_connection = True
            return True
        return False


CLAIM = 16 << 30  # what mode claim adds to a file's size


class _Claimed:
    """A file's bytes, said to be n bytes longer: zeros past the end."""

    def __init__(self, data, n):
        self.data, self.n = data, n

    def __len__(self):
        return len(self.data) + self.n

    def __getitem__(self, sl):
        a, b = sl.start, sl.stop
        head = self.data[a:b]
        return head + bytes(max(0, (b - a) - len(head)))


class _Quiet(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # clients that hang up (ggufs after a timeout) are expected


class Server:
    def __init__(self, root, port=0):
        self.lock = threading.Lock()
        self.conns = set()
        self.reset()
        self.stopping = False
        self.httpd = _Quiet(("127.0.0.1", port), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.root = root
        self.httpd.ctl = self
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def reset(self):
        self.n = self.faults = self.resolves = self.sig_gen = 0
        self.changed = self.stall = self.evil = False
        self.sig_ranges = []

    def url(self, mode, name):
        return "http://127.0.0.1:%d/%s/%s" % (self.port, mode, name)

    def stop(self):
        """Gone: the listening socket and every open connection closed."""
        self.stopping = True
        self.httpd.shutdown()
        self.httpd.server_close()
        with self.lock:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.conns.clear()


def start(root, port=0):
    """A server on port (0: any free one)."""
    return Server(root, port)
