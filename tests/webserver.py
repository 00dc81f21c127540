"""nginx (Debian's nginx-light) on 127.0.0.1 with a configuration of its
own, for the remote-source tests (tests/mount_remote.py) and the remote
bench (bench/remote.py): `nginx -c CONF -p DIR -g 'daemon off;'`, a free
port, an access log that names each request's Range and credentials."""
import os
import shutil
import socket
import subprocess
import time

CONF = """
{user}worker_processes 2;
error_log {d}/error.log;
pid {d}/nginx.pid;
events {{ worker_connections 256; }}
http {{
  log_format t '$request_method $uri $status "$http_range" "$http_authorization" "$http_x_secret" $host';
  access_log {d}/access.log t;
  client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp; fastcgi_temp_path {d}/tmp;
  uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;
  default_type application/octet-stream;
{http}
  server {{
    listen 127.0.0.1:{port};
    server_name 127.0.0.1 localhost;
    root {root};
{locations}
  }}
}}
"""


def exe():
    """The nginx binary, or None."""
    return shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Nginx:
    """locations: server-block lines, formatted with {port} and {root};
    http: http-block lines (map blocks), formatted alike.  as_root: workers
    run as root (directories made by mkdtemp are 0700)."""

    def __init__(self, d, root, locations="", as_root=False, http=""):
        self.d, self.www, self.port = d, root, free_port()
        os.makedirs(os.path.join(d, "tmp"), exist_ok=True)
        conf = os.path.join(d, "nginx.conf")
        with open(conf, "w") as f:
            f.write(CONF.format(d=d, root=root, port=self.port, user="user root;\n" if as_root else "",
                                locations=locations.format(port=self.port, root=root),
                                http=http.format(port=self.port, root=root)))
        self.proc = subprocess.Popen([exe(), "-c", conf, "-p", d, "-g", "daemon off;"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nginx did not start: %s" % self.proc.stderr.read().decode(errors="replace"))

    def url(self, path):
        return "http://127.0.0.1:%d/%s" % (self.port, path)

    def log_mark(self):
        p = os.path.join(self.d, "access.log")
        return os.path.getsize(p) if os.path.exists(p) else 0

    def log_since(self, mark):
        with open(os.path.join(self.d, "access.log")) as f:
            f.seek(mark)
            return [ln.rstrip("\n") for ln in f]

    def ranged_since(self, mark):
        return sum(1 for ln in self.log_since(mark) if '"bytes=' in ln)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
