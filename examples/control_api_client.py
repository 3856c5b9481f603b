#!/usr/bin/env python3
"""Drive roundtabled's control API from a script (standard library only).

Starts a roundtable, prints each turn as it finishes (from the SSE progress feed), prints the
result, and saves the Markdown export. The API is described in docs/control-api.md.

    python examples/control_api_client.py --agents pm,dev,rv --rounds 2 \\
        --directory ~/src/payments "Should we split the payments monolith?"

The token is read from the daemon's token file (default $XDG_CONFIG_HOME/roundtabled/token);
the daemon's address from ROUNDTABLED_URL (default http://127.0.0.1:4747).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def default_token_file() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "roundtabled" / "token"


class Client:
    """A tiny client: JSON in, JSON out, bearer token on every request."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url.rstrip("/")
        self.token = token

    def _request(self, method: str, path: str, body: Any = None) -> urllib.request.Request:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        return req

    def call(self, method: str, path: str, body: Any = None, timeout: float = 120) -> Any:
        try:
            with urllib.request.urlopen(self._request(method, path, body), timeout=timeout) as r:
                raw = r.read()
                ctype = r.headers.get("Content-Type", "")
                return json.loads(raw) if "json" in ctype else raw.decode()
        except urllib.error.HTTPError as exc:
            detail = json.loads(exc.read() or b"{}").get("error", exc.reason)
            raise SystemExit(f"{method} {path}: HTTP {exc.code}: {detail}") from None

    def events(self, session_id: str) -> Any:
        """Yield the progress items (``prompt``, ``turn``, ``phase``, ``done``) of a roundtable."""
        req = self._request("GET", f"/v1/roundtables/{session_id}/events")
        with urllib.request.urlopen(req, timeout=600) as resp:
            for line in resp:
                if line.startswith(b"data: "):
                    item = json.loads(line[6:])
                    yield item
                    if item.get("type") == "done":
                        return


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("prompt")
    p.add_argument("--agents", default="pm,dev,rv", help="comma-separated seats in order")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--directory", help="project directory (absolute) whose agents to seat")
    p.add_argument("--url", default=os.environ.get("ROUNDTABLED_URL", "http://127.0.0.1:4747"))
    p.add_argument("--token-file", type=Path, default=default_token_file())
    p.add_argument("--export", type=Path, default=Path("roundtable.md"), help="Markdown output")
    args = p.parse_args()

    client = Client(args.url, args.token_file.read_text().strip())
    print("daemon:", client.call("GET", "/v1/health")["version"])

    body: dict[str, Any] = {
        "agents": args.agents.split(","),
        "prompt": args.prompt,
        "rounds": args.rounds,
    }
    if args.directory:
        body["directory"] = str(Path(args.directory).expanduser().resolve())
    created = client.call("POST", "/v1/roundtables", body)
    ses = created["sessionID"]
    print(f"roundtable {ses}: {created['title']}")

    for item in client.events(ses):
        if item["type"] == "prompt":
            print(f"… round {item['round']}: {item['agent']} is speaking", file=sys.stderr)
        elif item["type"] == "turn":
            entry = item["entry"]
            print(f"\n## {entry['agent']} (round {entry['round']}, {entry['kind']})")
            print(entry.get("error") if entry.get("hasError") else entry.get("response", ""))

    result = client.call("GET", f"/v1/roundtables/{ses}/result?wait=30")
    print("\n" + (result.get("text") or result.get("summary") or ""))
    args.export.write_text(client.call("GET", f"/v1/roundtables/{ses}/export?format=md"))
    print(f"\nexported to {args.export}")
    return 0 if result.get("endReason") in (None, "completed", "repetition") else 3


if __name__ == "__main__":
    sys.exit(main())
