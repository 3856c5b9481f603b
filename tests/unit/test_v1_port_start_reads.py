"""The 1.x port's reads of a start (engine/launch.py's checks, docs/design.md "The server port"):
OpenCode 1.x's JSON read into the product's records, and S2 created with its index.

The answers are OpenCode 1.18.33's (the pinned 1.x server), as it gave them to the offline
configuration with a price on ``scripted/debater-1`` (``GET /agent``'s ``permission`` lists and
most providers' models left out; the project directory renamed). That the real server still
answers so is pinned by ``tests/contract/test_server_port.py``
(``test_1x_the_start_s_reads_go_through_v1_session``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from roundtabled.core.server_records import SessionMarks, SessionRef
from roundtabled.core.state import META_KEY, ModelRef, Phase
from roundtabled.errors import NotFound
from roundtabled.opencode.client import OpenCodeClient
from roundtabled.opencode.port import V1Port
from roundtabled.opencode.session_metadata import opening_metadata

PROJECT = "/home/me/project"

AGENTS: list[dict[str, Any]] = [
    {
        "name": "pm",
        "description": "Product manager seat",
        "mode": "subagent",
        "native": False,
        "hidden": None,
        "topP": None,
        "temperature": None,
        "color": "#3498db",
        "model": {"modelID": "debater-1", "providerID": "scripted"},
        "variant": None,
        "prompt": "You are pm, the product manager in a roundtable debate.\n"
        "Argue from the user's and the business's point of view. Be concise.",
        "options": {},
        "steps": None,
    },
    {
        "name": "plan",
        "description": "Plan mode. Disallows all edit tools.",
        "mode": "primary",
        "native": True,
        "options": {},
    },
    {
        "name": "compaction",
        "mode": "primary",
        "native": True,
        "hidden": True,
        "prompt": "You are a context summarization agent.",
        "options": {},
    },
]


def _model(provider: str, mid: str, name: str, cost: Mapping[str, Any]) -> dict[str, Any]:
    """One model of ``GET /config/providers`` as 1.18.33 lists it."""
    return {
        "id": mid,
        "providerID": provider,
        "api": {"id": mid, "url": "", "npm": "@ai-sdk/openai-compatible"},
        "name": name,
        "family": "",
        "capabilities": {
            "temperature": False,
            "reasoning": False,
            "attachment": False,
            "toolcall": True,
            "input": {"text": True, "audio": False, "image": False, "video": False, "pdf": False},
            "output": {"text": True, "audio": False, "image": False, "video": False, "pdf": False},
            "interleaved": False,
        },
        "cost": dict(cost),
        "limit": {"context": 128000, "output": 4096},
        "status": "active",
        "options": {},
        "headers": {},
        "release_date": "",
        "variants": {},
    }


FREE = {"input": 0, "output": 0, "cache": {"read": 0, "write": 0}}
PROVIDERS: dict[str, Any] = {
    "providers": [
        {
            "id": "opencode",
            "name": "OpenCode Zen",
            "source": "custom",
            "env": ["OPENCODE_API_KEY"],
            "options": {"apiKey": "public"},
            "models": {"big-pickle": _model("opencode", "big-pickle", "Big Pickle", FREE)},
        },
        {
            "id": "scripted",
            "name": "Scripted LLM",
            "source": "config",
            "env": [],
            "options": {"baseURL": "http://127.0.0.1:37457/v1", "apiKey": "unused"},
            "models": {
                "debater-1": _model(
                    "scripted",
                    "debater-1",
                    "Debater 1",
                    {"input": 3, "output": 15, "cache": {"read": 0, "write": 0}},
                ),
                "debater-2": _model("scripted", "debater-2", "Debater 2", FREE),
            },
        },
    ],
    "default": {"opencode": "big-pickle", "scripted": "orchestrator-1"},
}

S1: dict[str, Any] = {
    "id": "ses_db053cdb2ffe1vEZsIin8P6wlA",
    "slug": "sunny-panda",
    "projectID": "96e9c2080c5336204abbfe3adf3a4870a2838777",
    "directory": PROJECT,
    "path": "",
    "cost": 0,
    "tokens": {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}},
    "title": "S1",
    "version": "1.18.33",
    "time": {"created": 1796633014862, "updated": 1796633014862},
}
S2: dict[str, Any] = {
    "id": "ses_db053cda1ffe0kD4GlA50Hw1XB",
    "slug": "jolly-harbor",
    "projectID": "96e9c2080c5336204abbfe3adf3a4870a2838777",
    "directory": PROJECT,
    "path": "",
    "parentID": "ses_db053cdb2ffe1vEZsIin8P6wlA",
    "cost": 0,
    "tokens": {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}},
    "title": "rt",
    "version": "1.18.33",
    "metadata": {
        "roundtabled": {
            "v": 1,
            "phase": "active",
            "stateMessageID": "msg_x",
            "statePartID": "prt_x",
            "finalized": False,
        }
    },
    "time": {"created": 1796633014878, "updated": 1796633014878},
}


class Answers(OpenCodeClient):
    """The 1.x client answering each request with the JSON given for ``(method, path)``
    (``None``: 404), recording what was asked."""

    def __init__(self, answers: Mapping[tuple[str, str], Any]) -> None:
        super().__init__("http://127.0.0.1:9")
        self.answers = dict(answers)
        self.asked: list[tuple[str, str, dict[str, str], Any]] = []

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        retry: bool = True,
        timeout: float | None = None,
    ) -> tuple[Any, Mapping[str, str]]:
        self.asked.append((method, path, dict(params or {}), body))
        answer = self.answers.get((method, path))
        if answer is None:
            raise NotFound(f"{method} {path}: 404")
        return copy.deepcopy(answer), {}


async def test_agents_carry_their_model_and_their_prompt_text() -> None:
    port = V1Port(Answers({("GET", "/agent"): AGENTS}))
    pm, plan, compaction = await port.agents(PROJECT)
    assert pm.id == "pm" and pm.mode == "subagent" and pm.color == "#3498db"
    assert pm.model == ModelRef(providerID="scripted", modelID="debater-1")
    assert pm.hidden is False  # "hidden": null
    assert pm.has_system_prompt and pm.prompt == AGENTS[0]["prompt"]
    # an agent without a prompt of its own (OpenCode's plan) and a hidden one
    assert (plan.prompt, plan.has_system_prompt, plan.model, plan.hidden) == (
        None,
        False,
        None,
        False,
    )
    assert compaction.hidden is True


async def test_the_default_model_is_the_configuration_s_model_or_none() -> None:
    client = Answers({("GET", "/config"): {"model": "scripted/orchestrator-1", "agent": {}}})
    port = V1Port(client)
    assert await port.default_model(PROJECT) == ModelRef(
        providerID="scripted", modelID="orchestrator-1"
    )
    assert client.asked == [("GET", "/config", {"directory": PROJECT}, None)]
    assert await V1Port(Answers({("GET", "/config"): {"agent": {}}})).default_model(None) is None


async def test_the_providers_models_are_listed_and_only_a_set_price_is_a_price() -> None:
    port = V1Port(Answers({("GET", "/config/providers"): PROVIDERS}))
    listed = await port.provider_models(PROJECT)
    assert listed.labels == {"opencode/big-pickle", "scripted/debater-1", "scripted/debater-2"}
    # 0 for input and output is what the server reports for a model without a configured cost:
    # unknown, never a price of 0
    assert dict(listed.prices) == {"scripted/debater-1": (3.0, 15.0)}
    none_listed = V1Port(Answers({("GET", "/config/providers"): {"providers": []}}))
    empty = await none_listed.provider_models(None)
    assert (empty.labels, dict(empty.prices)) == (frozenset(), {})


@pytest.mark.parametrize(
    ("raw", "marks"),
    [
        (S1, SessionMarks(indexed=False, opening_of=None)),
        (S2, SessionMarks(indexed=True, opening_of=None)),
        (
            {**S1, "parentID": S2["id"], "metadata": opening_metadata(S2["id"], 1)},
            SessionMarks(indexed=False, opening_of=S2["id"]),
        ),
    ],
    ids=["a plain session", "a roundtable's own", "an opening seat's"],
)
async def test_a_session_s_marks_say_what_it_is_to_a_roundtable(
    raw: dict[str, Any], marks: SessionMarks
) -> None:
    port = V1Port(Answers({("GET", f"/session/{raw['id']}"): raw}))
    ref, got = await port.session_marks(raw["id"])
    assert got == marks
    assert (ref.id, ref.directory, ref.parent_id) == (raw["id"], PROJECT, raw.get("parentID"))
    with pytest.raises(NotFound):
        await port.session_marks("ses_gone")


async def test_s2_is_created_with_its_index_in_one_request() -> None:
    client = Answers({("POST", "/session"): S2})
    port = V1Port(client)
    made = await port.create_indexed_session(
        PROJECT, S1["id"], "rt", Phase.ACTIVE, "msg_x", "prt_x", finalized=False
    )
    assert made == SessionRef(S2["id"], PROJECT, S1["id"], "rt")
    ((method, path, params, body),) = client.asked
    assert (method, path, params) == ("POST", "/session", {"directory": PROJECT})
    assert body == {"parentID": S1["id"], "title": "rt", "metadata": S2["metadata"]}
    assert body["metadata"][META_KEY]["phase"] == "active"
