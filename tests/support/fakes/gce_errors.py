"""GCE's HTTP error shape for the fake Compute API and the strict layer in front of it:
`{"error": {"code", "message", "errors": [{"domain": "global", "reason", "message"}]}}`."""

from __future__ import annotations

import json

from werkzeug.wrappers import Response


class ApiError(Exception):
    """An HTTP error in GCE's JSON error shape."""

    def __init__(self, status: int, message: str, reason: str = "invalid") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason

    def response(self) -> Response:
        body = {"error": {"code": self.status, "message": self.message,
                          "errors": [{"domain": "global", "reason": self.reason, "message": self.message}]}}
        return Response(json.dumps(body), status=self.status, mimetype="application/json")
