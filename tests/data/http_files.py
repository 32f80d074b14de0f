"""A payload to fetch and a loopback HTTP server for the download tests (``test_transfer.py``,
``test_download.py``; their fixtures ``server`` and ``source`` are in ``conftest.py``).

The server (``http.server`` on 127.0.0.1 in a thread) answers ``Range`` requests with 206, can
ignore them (200), drop the connection halfway through a body, and logs every request, so that
resumed downloads are checked by what was actually requested.
"""

from __future__ import annotations

import hashlib
import re
from http.server import BaseHTTPRequestHandler

import numpy as np

PAYLOAD = np.random.default_rng(0).integers(0, 256, 300_000, dtype=np.uint8).tobytes()
MD5 = hashlib.md5(PAYLOAD).hexdigest()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        server = self.server
        server.requests.append((self.path, self.headers.get("Range")))
        data = server.files.get(self.path)
        if data is None:
            self.send_error(404)
            return
        start = 0
        header = self.headers.get("Range")
        if header and server.mode != "ignore_range":
            start = int(re.fullmatch(r"bytes=(\d+)-", header).group(1))
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if server.mode == "drop":  # promise the whole body, send half, hang up
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)

    def log_message(self, *args):
        pass
