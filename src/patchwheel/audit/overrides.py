"""Does an override still accept what the provider passes? One method against its base.

The provider calls an override the way its own base method is declared: any argument the base
declares may come by position or by name. An override must therefore accept every parameter the
base declares (same position, same name, not keyword-only where the base takes it by position,
``*args``/``**kwargs`` where the base has them) and require nothing the base's callers may leave
out. Each way it falls short is a :class:`Problem` whose key names the base parameter's kind and
requiredness, so a base that made a parameter required or keyword-only gives a new key at the
new pin even where the override looked the same at the baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

from patchwheel.audit.engine import Member, Param

POSITIONAL = ("positional-only", "positional-or-keyword")
NAMED = ("positional-or-keyword", "keyword-only")


@dataclass(frozen=True)
class Problem:
    """One way an override no longer accepts what its base declares."""

    param: str  # the parameter at fault ("" for the method as a whole)
    key: str  # stable across versions: what is wrong, with the base parameter's kind
    text: str


def _need(param: Param) -> str:
    return "required" if param.required else "optional"


def _article(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def is_private(name: str) -> bool:
    """``_name`` (never a dunder): a provider member no contract covers."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _binding(own: Member, base: Member) -> list[Problem]:
    """Property against method, or a classmethod the provider calls on the class."""
    base_value = base.binding in ("property", "attribute")
    own_value = own.binding in ("property", "attribute")
    if base_value != own_value:
        what = "a value (property)" if base_value else f"{_article(base.binding)} method"
        mine = "a value (property)" if own_value else f"{_article(own.binding)} method"
        return [
            Problem(
                "",
                f"binding {base.binding} {own.binding}",
                f"the base's {base.name} is {what}, the override {mine}",
            )
        ]
    if base.binding == "class" and own.binding == "instance":
        return [
            Problem(
                "",
                "binding class instance",
                f"the provider calls {base.name} on the class (a classmethod); the override "
                "is an instance method",
            )
        ]
    return []


def problems(own: Member, base: Member) -> list[Problem]:
    """What the override `own` does not accept of `base`'s declaration (empty: compatible)."""
    found = _binding(own, base)
    if found or base.binding in ("property", "attribute"):
        return found
    own_pos = [p for p in own.params if p.kind in POSITIONAL]
    own_named = {p.name: p for p in own.params if p.kind in NAMED}
    own_star = any(p.kind == "var-positional" for p in own.params)
    own_kwargs = any(p.kind == "var-keyword" for p in own.params)
    base_pos = [p for p in base.params if p.kind in POSITIONAL]
    base_named = {p.name: p for p in base.params if p.kind in NAMED}
    out: list[Problem] = []
    for index, param in enumerate(base_pos):
        by_position = index < len(own_pos) or own_star
        if param.kind == "positional-only":
            if not by_position:
                out.append(
                    Problem(
                        param.name or f"#{index + 1}",
                        f"positional {index} {_need(param)}",
                        f"takes no argument {index + 1} (positional in the base)",
                    )
                )
            continue
        mine = own_named.get(param.name)
        there = own_pos[index].name if index < len(own_pos) else None
        renamed = there is not None and there not in base_named
        if mine is None and renamed:
            # Passed by name, the value misses that parameter (or lands in **kwargs).
            out.append(
                Problem(
                    param.name,
                    f"accept {param.name} {param.kind} {_need(param)}",
                    f"does not accept {param.name} by name ({_need(param)} in the base; its "
                    f"parameter {index + 1} is {there})",
                )
            )
        elif mine is None and not own_kwargs:
            out.append(
                Problem(
                    param.name,
                    f"accept {param.name} {param.kind} {_need(param)}",
                    f"does not accept {param.name} ({_need(param)} in the base)",
                )
            )
        elif mine is not None and mine.kind == "keyword-only":
            out.append(
                Problem(
                    param.name,
                    f"keyword-only {param.name}",
                    f"{param.name} is keyword-only in the override; the base takes it by position",
                )
            )
        elif mine is not None and own_pos.index(mine) != index:
            out.append(
                Problem(
                    param.name,
                    f"position {param.name} {index}",
                    f"{param.name} is parameter {own_pos.index(mine) + 1} of the override, "
                    f"{index + 1} of the base",
                )
            )
        elif mine is None and not by_position:
            out.append(
                Problem(
                    param.name,
                    f"positional {param.name} {index}",
                    f"takes {param.name} only by name; the base also takes it by position",
                )
            )
    for param in base.params:
        if param.kind == "keyword-only" and param.name not in own_named and not own_kwargs:
            out.append(
                Problem(
                    param.name,
                    f"accept {param.name} keyword-only {_need(param)}",
                    f"does not accept keyword {param.name} ({_need(param)} in the base)",
                )
            )
    for kind, star, label in (
        ("var-positional", own_star, "*args"),
        ("var-keyword", own_kwargs, "**kwargs"),
    ):
        if any(p.kind == kind for p in base.params) and not star:
            out.append(Problem(label, kind, f"the base takes {label}; the override does not"))
    out += _requires(own, base_pos, base_named)
    return out


def _requires(own: Member, base_pos: list[Param], base_named: dict[str, Param]) -> list[Problem]:
    """What the override requires that a call made the base's way may leave out."""
    out = []
    for index, param in enumerate(p for p in own.params if not p.kind.startswith("var-")):
        if not param.required:
            continue
        theirs = base_named.get(param.name)
        if theirs is not None:
            if not theirs.required:
                out.append(
                    Problem(
                        param.name,
                        f"required {param.name}",
                        f"{param.name} is required by the override, optional in the base",
                    )
                )
            continue
        if param.kind in POSITIONAL and index < len(base_pos) and base_pos[index].required:
            continue  # always passed by position (a name passed instead is reported above)
        out.append(
            Problem(
                param.name,
                f"extra {param.name}",
                f"requires {param.name}, which the base does not declare (removed or renamed?)",
            )
        )
    return out
