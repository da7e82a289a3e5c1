"""Peak memory of one request answered by a gzip bomb (issue 39, item 4): a real HTTP server on 127.0.0.1 sends a
body small on the wire that decodes to `--decoded-mb`; a child process asks it once through the real LLM client
(cap 16 MiB, the default) and once through a SPARQL endpoint's client (byte cap 32 MiB, the default), and reports
its peak RSS before and after each request and how the request ended.

Run: .venv/bin/python bench/decoded_peak.py [--decoded-mb 1400]
"""

from __future__ import annotations

import argparse
import json
import socketserver
import subprocess
import sys
import threading
import zlib

CHILD = r"""
import json, resource, sys
from sparqlnav.llm import LLMClient, LLMConfig, Message
from sparqlnav.graph.endpoint import HttpOptions, RemoteEndpoint

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

url, face = sys.argv[1], sys.argv[2]
before = peak()
if face == "llm":
    config = LLMConfig.model_validate({"model": "m", "base_url": url + "/v1", "api_key": "k", "max_retries": 0})
    try:
        with LLMClient(config) as client:
            client.chat([Message.user("Say hello.")])
        how = "answered"
    except Exception as exc:
        how = f"{type(exc).__name__}: {str(exc)[-80:]}"
else:
    with RemoteEndpoint(url + "/sparql", http=HttpOptions(retries=0)) as endpoint:
        result = endpoint.query("SELECT ?v WHERE { ?s ?p ?v }")
    how = f"{result.outcome.value}: {result.message[:80]}"
print(json.dumps({"before_mb": before, "after_mb": peak(), "how": how}))
"""

OPENINGS = {
    "llm": b'{"id": "c1", "object": "chat.completion", "model": "m", "x": "',
    "endpoint": b'{"head": {"vars": ["v"]}, "results": {"bindings": [{"v": {"type": "literal", "value": "',
}


def bomb(opening: bytes, decoded_mb: int) -> bytes:
    """`opening` then `decoded_mb` MiB of `a`, gzip-compressed."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"a" * (1024 * 1024)
    parts = [packer.compress(opening)] + [packer.compress(block) for _ in range(decoded_mb)]
    return b"".join([*parts, packer.compress(b'"}'), packer.flush()])


def serve(body: bytes) -> socketserver.ThreadingTCPServer:
    """A server answering every request with `body`, gzip-encoded JSON."""

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            length = 0
            while (line := self.rfile.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            self.rfile.read(length)
            head = (
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            try:
                self.wfile.write(head.encode() + body)
            except OSError:
                return

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    """Print one line per face."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--decoded-mb", type=int, default=1400)
    args = parser.parse_args()
    for face, opening in OPENINGS.items():
        body = bomb(opening, args.decoded_mb)
        server = serve(body)
        url = f"http://127.0.0.1:{server.server_address[1]}"
        out = subprocess.run([sys.executable, "-c", CHILD, url, face], capture_output=True, text=True, check=False)
        server.shutdown()
        server.server_close()
        line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
        if not line:
            print(f"{face:9} {len(body) / 1e6:.2f} MB on the wire, {args.decoded_mb:,} MiB decoded: the child failed "
                  f"({out.returncode}): {out.stderr.strip()[-200:]}")
            continue
        got = json.loads(line)
        print(f"{face:9} {len(body) / 1e6:.2f} MB on the wire, {args.decoded_mb:,} MiB decoded: peak RSS "
              f"{got['before_mb']:.0f} -> {got['after_mb']:.0f} MiB; {got['how']}", flush=True)


if __name__ == "__main__":
    main()
