#!/usr/bin/env python3
"""A small HTTP server for tests/fetch.sh, Python's standard library only.

    httpd.py ROOT PORT_FILE LOG_FILE [CONTROL_FILE]

Serves the files of ROOT on 127.0.0.1 and a free port, written to PORT_FILE once listening.
Each file's ETag is the strong "sha256 of its bytes"; Last-Modified is its mtime. Honours
If-None-Match and If-Modified-Since (304), Range "bytes=N-" / "bytes=N-M" with If-Range (206,
416). LOG_FILE gets one line a request: METHOD PATH STATUS, then the request headers that
matter (range=..., if-range=..., if-none-match=..., if-modified-since=...).

CONTROL_FILE, a JSON object read at every request, misbehaves on purpose; each counter is
decremented as it is used (the file rewritten):
    {"fail": N, "status": 503, "retry_after": S}   the next N requests answer status
    {"fail": N, "status": 404, "body": "endless"}   ... with an endless error page (as below)
    {"cut": N, "cut_after": K}    the next N bodies stop after K bytes, the connection dropped
    {"stall": N, "stall_seconds": S}   the next N bodies send one byte, then nothing for S s
    {"endless": N, "endless_seconds": S}   the next N answers are 200 without a Content-Length
                                  and a body that never ends: the file, then zeros, 64 KiB at a
                                  time, until the client hangs up (or S s, 20 by default, pass)
    {"slow": N, "slow_seconds": S}   the next N bodies take S s (10 by default): the file sent in
                                  100 pieces, one every S/100 s
"""
import email.utils
import hashlib
import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT, PORT_FILE, LOG_FILE = sys.argv[1:4]
CONTROL_FILE = sys.argv[4] if len(sys.argv) > 4 else None
lock = threading.Lock()


def take(knob):
    """The control file's settings when counter knob is above 0, decrementing it; else None."""
    if not CONTROL_FILE:
        return None
    with lock:
        try:
            with open(CONTROL_FILE) as f:
                control = json.load(f)
        except (OSError, ValueError):
            return None
        if control.get(knob, 0) <= 0:
            return None
        control[knob] -= 1
        with open(CONTROL_FILE + ".tmp", "w") as f:
            json.dump(control, f)
        os.replace(CONTROL_FILE + ".tmp", CONTROL_FILE)
        return control


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def log(self, status):
        notes = [f"{h.lower()}={self.headers[h]}" for h in
                 ("Range", "If-Range", "If-None-Match", "If-Modified-Since") if self.headers.get(h)]
        with lock, open(LOG_FILE, "a") as f:
            f.write(" ".join([self.command, self.path, str(status)] + notes) + "\n")

    def begin(self, status, headers, length):
        """Logs the request and sends the status line and headers; True when a body follows."""
        self.log(status)
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        return self.command != "HEAD"

    def answer(self, status, headers=(), body=b""):
        if self.begin(status, headers, len(body)):
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        failing = take("fail")
        if failing and failing.get("body") == "endless":
            return self.send_endless(b"failing on purpose\n", failing.get("endless_seconds", 20),
                                     failing.get("status", 503))
        if failing:
            extra = [("Retry-After", str(failing["retry_after"]))] if "retry_after" in failing else []
            return self.answer(failing.get("status", 503), extra, b"failing on purpose\n")
        path = os.path.normpath(os.path.join(ROOT, self.path.split("?")[0].lstrip("/")))
        if not path.startswith(os.path.abspath(ROOT)) or not os.path.isfile(path):
            return self.answer(404, (), b"not found\n")
        with open(path, "rb") as f:
            data = f.read()
        etag = '"%s"' % hashlib.sha256(data).hexdigest()
        mtime = int(os.stat(path).st_mtime)
        last_modified = email.utils.formatdate(mtime, usegmt=True)
        validators = [("ETag", etag), ("Last-Modified", last_modified)]
        inm = self.headers.get("If-None-Match")
        ims = self.headers.get("If-Modified-Since")
        if inm is not None:
            if inm.strip() == "*" or etag in [t.strip() for t in inm.split(",")]:
                return self.answer(304, validators)
        elif ims is not None:
            try:
                if mtime <= email.utils.parsedate_to_datetime(ims).timestamp():
                    return self.answer(304, validators)
            except (TypeError, ValueError):
                pass
        status, start, end = 200, 0, len(data)
        wanted = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        if wanted and wanted.startswith("bytes=") and (if_range is None or if_range in (etag, last_modified)):
            first, _, last = wanted[6:].partition("-")
            start = int(first)
            end = min(int(last) + 1, len(data)) if last else len(data)
            if start >= len(data):
                return self.answer(416, [("Content-Range", "bytes */%d" % len(data))])
            status = 206
            validators.append(("Content-Range", "bytes %d-%d/%d" % (start, end - 1, len(data))))
        self.send_body(status, validators, data[start:end])

    def send_endless(self, body, seconds, status=200):
        """No length: the connection's end would end the body, and it never comes."""
        self.log(status)
        self.send_response(status)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        chunk = b"\0" * 65536
        until = time.monotonic() + seconds
        try:
            self.wfile.write(body)
            while time.monotonic() < until:
                self.wfile.write(chunk)
        except OSError:   # the client hung up: what a capped download does
            pass

    def send_slow(self, status, headers, body, seconds):
        if not self.begin(status, headers, len(body)):
            return
        step = max(1, (len(body) + 99) // 100)
        try:
            for i in range(0, len(body), step):
                self.wfile.write(body[i:i + step])
                self.wfile.flush()
                time.sleep(seconds / 100)
        except OSError:   # the client hung up: a signal stopped it
            self.close_connection = True

    def send_body(self, status, headers, body):
        endless = take("endless")
        if endless:
            return self.send_endless(body, endless.get("endless_seconds", 20))
        slow = take("slow")
        if slow:
            return self.send_slow(status, headers, body, slow.get("slow_seconds", 10))
        cut, stall = take("cut"), None
        if not cut:
            stall = take("stall")
        if not self.begin(status, headers, len(body)):
            return
        if cut:
            self.wfile.write(body[:cut.get("cut_after", len(body) // 2)])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
        elif stall:
            self.wfile.write(body[:1])
            self.wfile.flush()
            time.sleep(stall.get("stall_seconds", 10))
            self.close_connection = True
        else:
            self.wfile.write(body)


class Server(ThreadingHTTPServer):
    daemon_threads = True


server = Server(("127.0.0.1", 0), Handler)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write("%d\n" % server.server_address[1])
os.replace(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()
