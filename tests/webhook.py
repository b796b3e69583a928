#!/usr/bin/env python3
"""A webhook for tests/notify.sh, on loopback only (Python 3 standard library).

Listens on 127.0.0.1 at a free port, written to PORT_FILE once it listens; appends each POST
as one JSON line to LOG ({"path", "headers", "body"}: body parsed as JSON when it is). Modes:
  ok          answer 200 to every POST
  hang        read the request, then never answer
  fail-first  answer 500 to the first N POSTs (--failures N), then 200
It exits after --lifetime seconds (default 120), so a test that dies leaves nothing behind.
"""
import argparse
import http.server
import json
import os
import threading
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port_file")
    parser.add_argument("log")
    parser.add_argument("--mode", choices=["ok", "hang", "fail-first"], default="ok")
    parser.add_argument("--failures", type=int, default=1)
    parser.add_argument("--lifetime", type=float, default=120)
    args = parser.parse_args()
    lock = threading.Lock()
    seen = [0]

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode("utf-8", "replace")
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw
            with lock:
                seen[0] += 1
                count = seen[0]
                with open(args.log, "a") as log:
                    log.write(json.dumps({"path": self.path, "headers": dict(self.headers.items()),
                                          "body": body}) + "\n")
            if args.mode == "hang":
                time.sleep(args.lifetime)
                return
            status = 500 if args.mode == "fail-first" and count <= args.failures else 200
            answer = b'{"ok": %s}' % (b"true" if status == 200 else b"false")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args):
            pass   # quiet: the test reads LOG

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(args.port_file + ".tmp", "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(args.port_file + ".tmp", args.port_file)   # whole, or not there yet
    threading.Timer(args.lifetime, server.shutdown).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
