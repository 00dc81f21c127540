"""A small HTTP server that misbehaves on purpose (tests/mount_remote.py).

URLs are /MODE/NAME for a file NAME of the served directory:
  drop     every other ranged answer is cut mid-body (the connection closed)
  503      the first two ranged requests get 503, then it serves
  norange  ignores Range: 200 and the whole file
  change   serves the file until .changed is set, then another version
           (other bytes, other ETag) that honours If-Match like a real one
  signed   redirects to /sig/GEN/NAME, a "signed URL" valid while GEN is
           .sig_gen (else 403, as an expired one); .resolves counts
           the redirects given
  stall    once .stall is set, ranged requests get their headers and then
           no byte (until .stall is cleared)
  nohead   HEAD gets 405 (Method Not Allowed); GET serves
  getonly  HEAD gets 403, as an object store's URL signed for GET only
Otherwise HEAD answers with Content-Length, a strong ETag, Last-Modified and
Accept-Ranges.  .faults counts the faults injected.
"""
import email.utils
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
        if mode == "change" and self.server.ctl.changed:
            data = bytes(b ^ 0x5a for b in data)
            etag = '"v2-%d"' % len(data)
        return mode, data, etag

    def _headers(self, code, n, etag, extra=()):
        self.send_response(code)
        self.send_header("Content-Length", str(n))
        self.send_header("ETag", etag)
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
            self._headers(200, len(f[1]), f[2])

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
        if im is not None and im != etag:
            self._empty(412)
            return
        a, b = int(rng.group(1)), min(int(rng.group(2)), len(data) - 1)
        body = data[a:b + 1]
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
        self._headers(206, len(body), etag, cr)
        self.wfile.write(body)


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
        self.changed = self.stall = False

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
