"""A small evaluator of IAM identity policies, of exactly what infra/workshop-account.yaml's policies use: Allow and
Deny, Action and Resource wildcards, policy variables (``${aws:SourceIdentity}``) in resources and condition values,
and the condition operators StringEquals, StringLike, ArnEquals, ArnLike, Bool, Null, NumericLessThanEquals and the
ForAllValues: qualifier. An operator it does not know fails the evaluation (never a silent allow). IAM's rules it
follows: an explicit Deny wins; no matching Allow is an implicit deny; a policy variable missing from the request
makes its statement not apply."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Request:
    action: str
    resource: str
    context: dict = field(default_factory=dict)  # condition keys: str, or list for multivalued keys


class Missing(Exception):
    """A policy variable the request does not carry."""


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def _substitute(text: str, context: dict) -> str:
    def one(m):
        if m.group(1) not in context:
            raise Missing(m.group(1))
        return str(context[m.group(1)])

    return re.sub(r"\$\{([^}]+)\}", one, text)


def _like(pattern: str, value: str) -> bool:
    return fnmatch.fnmatchcase(value, pattern)


def _arn_like(pattern: str, value: str) -> bool:
    # ArnLike compares the six colon-separated parts, each with wildcards
    p, v = pattern.split(":", 5), value.split(":", 5)
    return len(p) == len(v) == 6 and all(_like(a, b) for a, b in zip(p, v))


MATCHERS = {
    "StringEquals": lambda p, v: p == v,
    "StringLike": _like,
    "ArnEquals": lambda p, v: p == v,
    "ArnLike": _arn_like,
    "Bool": lambda p, v: p.lower() == str(v).lower(),
    "NumericLessThanEquals": lambda p, v: float(v) <= float(p),
}


def _condition_holds(operator: str, key: str, wanted, context: dict) -> bool:
    patterns = [_substitute(str(w), context) for w in _as_list(wanted)]
    if operator == "Null":
        return (key not in context) == (patterns[0].lower() == "true")
    qualifier, _, name = operator.rpartition(":")
    if name not in MATCHERS:
        raise NotImplementedError(f"condition operator {operator!r}")
    match = MATCHERS[name]
    if qualifier == "ForAllValues":
        return all(any(match(p, str(v)) for p in patterns) for v in _as_list(context.get(key, [])))
    if qualifier:
        raise NotImplementedError(f"condition qualifier {qualifier!r}")
    if key not in context:
        return False
    return any(match(p, str(v)) for p in patterns for v in _as_list(context[key]))


def _applies(statement: dict, request: Request) -> bool:
    actions = _as_list(statement["Action"])
    if not any(fnmatch.fnmatchcase(request.action.lower(), a.lower()) for a in actions):
        return False
    try:
        resources = [_substitute(r, request.context) for r in _as_list(statement["Resource"])]
        if not any(_like(r, request.resource) for r in resources):
            return False
        conditions = statement.get("Condition", {})
        return all(
            _condition_holds(op, key, wanted, request.context)
            for op, pairs in conditions.items()
            for key, wanted in pairs.items()
        )
    except Missing:
        return False


def decide(statements: list[dict], request: Request) -> str:
    """ "allowed", "denied" (an explicit Deny) or "implicitly denied" (no Allow matched)."""
    applying = [s for s in statements if _applies(s, request)]
    if any(s["Effect"] == "Deny" for s in applying):
        return "denied"
    return "allowed" if any(s["Effect"] == "Allow" for s in applying) else "implicitly denied"
