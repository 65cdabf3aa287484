"""The metadata service a cloud VM reaches on its own link-local address, served inside a container standing in for
the VM (stdlib only: it runs under the container's python3). One process answers both clouds' paths:

- EC2 IMDSv2 (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/configuring-instance-metadata-service.html):
  `PUT /latest/api/token` (with X-aws-ec2-metadata-token-ttl-seconds) then GETs under /latest/meta-data/ with the
  token (401 without); `tags/instance/<key>`, `placement/region`, `ami-launch-index`; `spot/instance-action` 404.
- GCE (https://cloud.google.com/compute/docs/metadata/querying-metadata): every request with `Metadata-Flavor:
  Google` (403 without); `project/project-id`, `instance/zone`, `instance/name`,
  `instance/service-accounts/default/token`, `instance/preempted`, guest attributes by PUT.

Usage: python3 vm_metadata.py CONFIG.json PORT — CONFIG holds {"tags": {...}, "region": ..., "launch_index": ...,
"project": ..., "zone": ..., "name": ..., "token": ...}; every request is appended to CONFIG's folder/requests.log.
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

with open(sys.argv[1]) as config_file:
    CONFIG = json.load(config_file)
LOG = os.path.join(os.path.dirname(sys.argv[1]), "requests.log")
TOKEN = "imds-token-in-vm"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass

    def _answer(self, status, body=""):
        with open(LOG, "a") as fh:
            fh.write(json.dumps([self.command, self.path, status]) + "\n")
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        if self.path == "/latest/api/token":
            return self._answer(200 if self.headers.get("X-aws-ec2-metadata-token-ttl-seconds") else 400, TOKEN)
        if self.path.startswith("/computeMetadata/v1/instance/guest-attributes/"):
            return self._answer(200 if self.headers.get("Metadata-Flavor") == "Google" else 403)
        return self._answer(404)

    def do_GET(self):
        if self.path.startswith("/latest/meta-data/"):
            if self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
                return self._answer(401)
            key = self.path[len("/latest/meta-data/"):]
            tags = CONFIG.get("tags", {})
            if key.startswith("tags/instance/") and key[len("tags/instance/"):] in tags:
                return self._answer(200, tags[key[len("tags/instance/"):]])
            if key == "placement/region":
                return self._answer(200, CONFIG.get("region", "us-east-1"))
            if key == "ami-launch-index":
                return self._answer(200, str(CONFIG.get("launch_index", 0)))
            return self._answer(404)
        if self.path.startswith("/computeMetadata/v1/"):
            if self.headers.get("Metadata-Flavor") != "Google":
                return self._answer(403)
            key = self.path[len("/computeMetadata/v1/"):]
            answers = {"project/project-id": CONFIG.get("project", ""),
                       "instance/zone": f"projects/123456789/zones/{CONFIG.get('zone', '')}",
                       "instance/name": CONFIG.get("name", ""), "instance/preempted": "FALSE",
                       "instance/service-accounts/default/token": json.dumps(
                           {"access_token": CONFIG.get("token", ""), "expires_in": 3599, "token_type": "Bearer"})}
            if answers.get(key):
                return self._answer(200, answers[key])
            return self._answer(404)
        return self._answer(404)


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), Handler).serve_forever()
