"""A local server speaking the parts of the Hugging Face Hub HTTP protocol that `push_to_hub` uses
(docs/testing.md §12): create repo, validate YAML, preupload, commit (NDJSON, base64 files)."""

import base64
import hashlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def start_fake_hub(root):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def reply(self, obj, code=200):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path.startswith("/api/whoami-v2"):
                return self.reply({"name": "tester", "type": "user", "orgs": []})
            self.reply({"error": "not found"}, 404)

        def do_POST(self):
            path = self.path.split("?")[0]
            parts = path.strip("/").split("/")
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            base = f"http://{self.headers['Host']}"
            if path == "/api/repos/create":
                req = json.loads(data or b"{}")
                rid = f"{req.get('organization') or 'tester'}/{req['name']}"
                return self.reply({"url": f"{base}/{rid}", "id": rid})
            if path == "/api/validate-yaml":
                return self.reply({"errors": [], "warnings": []})
            if parts[0] == "api" and len(parts) >= 6 and parts[4] == "preupload":
                files = json.loads(data)["files"]
                return self.reply(
                    {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files]}
                )
            if parts[0] == "api" and len(parts) >= 6 and parts[4] == "commit":
                repo = "/".join(parts[2:4])
                for line in data.decode().splitlines():
                    item = json.loads(line)
                    if item["key"] == "file":
                        dest = os.path.join(root, repo, item["value"]["path"])
                        os.makedirs(os.path.dirname(dest), exist_ok=True)
                        with open(dest, "wb") as fh:
                            fh.write(base64.b64decode(item["value"]["content"]))
                oid = hashlib.sha1(data).hexdigest()
                return self.reply({"commitUrl": f"{base}/{repo}/commit/{oid}", "commitOid": oid})
            self.reply({"error": f"unhandled {path}"}, 404)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
