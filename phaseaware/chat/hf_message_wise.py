"""Which Jinja chat templates write each message on its own: the proof behind ``hf``'s
incremental render.

A template is *message-wise* when its text of messages ``m0 .. mn`` is::

    opening(m0) + piece(m0, first=True) + piece(m1, m0, first=False) + ... + closing(gen)

where each piece depends on its own message, the first message and whether it is the
first, and on the render's fixed inputs (special tokens, bound tools, thinking) only;
the opening on the first message and the fixed inputs; the closing on those and
``add_generation_prompt``. Then the text of ``messages[:k]`` without the generation
prompt is a start of the text of ``messages``, and the pieces of ``messages[k:]`` are
the text of ``[messages[0], *messages[k:]]`` after the text of ``[messages[0]]``: a
render of the new messages (and the first) only.

:func:`message_wise` proves it from the template's syntax tree, conservatively: one
``{% for %}`` over ``messages`` at the top level; before it, statements that read
``messages`` only as ``messages[0]``; inside it, the loop variable, ``messages[0]``
and ``loop.first`` (no ``loop.index``, ``loop.last``, ``loop.previtem``/``nextitem``,
``loop.cycle``/``changed``, no other ``messages[...]``: lookbehind and lookahead), no
``{% break %}``, no namespace writes (``{% set ns.x = ... %}``: state carried from one
message to the next), no stateful or time-dependent globals (``joiner``, ``cycler``,
``lipsum``, ``strftime_now``: never read at all, so no object made outside the loop keeps
state across messages; the sandbox refuses to mutate lists and dicts), no ``random``
filter, and no global function called by name but ``raise_exception``, ``range``,
``dict`` and ``namespace``; after it, constant text and
``{% if add_generation_prompt %}`` blocks that read no message but the first. Anything else (macros, includes, call blocks, extension tags, a
second loop over ``messages``) is not proven, and the caller renders the whole
conversation. Jinja scopes a ``{% set %}`` inside a loop body to one iteration, so
such assignments are allowed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from phaseaware.caches import register_cache
from phaseaware.errors import TemplateError

__all__ = ["message_wise"]

# names whose meaning the proof depends on: never assigned by a template it accepts
_RESERVED = frozenset({"messages", "loop", "add_generation_prompt"})
# global functions a piece may call by name: pure (raise_exception stops every render alike)
_PURE_CALLS = frozenset({"raise_exception", "range", "dict", "namespace"})
# globals never read at all: state kept across calls (cycler, joiner), chance, the clock
_IMPURE_NAMES = frozenset({"cycler", "joiner", "lipsum", "strftime_now"})
_IMPURE_FILTERS = frozenset({"random"})  # also refused as a name handed to map()


class _Unproven(Exception):
    """The template is not proven message-wise (the reason is the message)."""


@dataclass(frozen=True)
class _Scope:
    """Where an expression sits: ``part`` is opening, loop or closing; ``inner``: inside
    a nested ``{% for %}`` (there ``loop`` is that loop's, over message-local values)."""

    part: str
    inner: bool = False


@lru_cache(maxsize=16)
def message_wise(source: str) -> str | None:
    """The closing text without the generation prompt of the Jinja chat template
    ``source`` when it is proven message-wise (module doc), else None."""
    from phaseaware.tokenizers.hf_template import parse_chat_template

    try:
        tree = parse_chat_template(source)
        return _template(tree.body)
    except (_Unproven, TemplateError):
        return None


register_cache(
    "chat.hf message-wise proofs",
    size=lambda: (message_wise.cache_info().currsize, None),
    clear=message_wise.cache_clear,
    bound="LRU, 16 templates",
)


def _template(body: list[Any]) -> str:
    """The closing's text without the generation prompt, once the template is proven."""
    from jinja2 import nodes

    loops = [
        i
        for i, node in enumerate(body)
        if isinstance(node, nodes.For)
        and isinstance(node.iter, nodes.Name)
        and node.iter.name == "messages"
    ]
    if len(loops) != 1:
        raise _Unproven("not one top-level loop over messages")
    at = loops[0]
    for node in body[:at]:
        _statement(node, _Scope("opening"))
    loop = body[at]
    if loop.recursive or loop.else_ or loop.test is not None:
        raise _Unproven("the messages loop is recursive, filtered or has an else")
    if not isinstance(loop.target, nodes.Name) or loop.target.name in _RESERVED:
        raise _Unproven("the messages loop's variable")
    for node in loop.body:
        _statement(node, _Scope("loop"))
    closing = []
    for node in body[at + 1 :]:  # constant text, or what only the generation prompt writes
        if isinstance(node, nodes.Output) and all(_constant(c) for c in node.nodes):
            closing += [_text(c) for c in node.nodes]
        elif (
            isinstance(node, nodes.If)
            and isinstance(node.test, nodes.Name)
            and node.test.name == "add_generation_prompt"
            and not node.elif_
            and not node.else_
        ):
            for child in node.body:
                _statement(child, _Scope("closing"))
        else:
            raise _Unproven("the closing writes more than the generation prompt")
    return "".join(closing)


def _text(node: Any) -> str:
    """A constant output node's text."""
    return str(node.data if hasattr(node, "data") else node.value)


def _constant(node: Any) -> bool:
    from jinja2 import nodes

    return isinstance(node, nodes.TemplateData) or (
        isinstance(node, nodes.Const) and isinstance(node.value, str)
    )


def _statement(node: Any, scope: _Scope) -> None:
    from jinja2 import nodes

    child: Any
    if isinstance(node, nodes.Output):
        for child in node.nodes:
            _expression(child, scope)
    elif isinstance(node, nodes.If):
        _expression(node.test, scope)
        for child in (*node.body, *node.elif_, *node.else_):
            _statement(child, scope)
    elif isinstance(node, nodes.For):
        if node.recursive:
            raise _Unproven("a recursive loop")
        _expression(node.iter, scope)
        _targets(node.target)
        inside = _Scope(scope.part, inner=True)
        if node.test is not None:
            _expression(node.test, inside)
        for child in node.body:
            _statement(child, inside)
        for child in node.else_:
            _statement(child, scope)
    elif isinstance(node, nodes.Assign):
        _targets(node.target)
        _expression(node.node, scope)
    elif isinstance(node, nodes.AssignBlock):
        _targets(node.target)
        if node.filter is not None:
            raise _Unproven("a filtered set block")
        for child in node.body:
            _statement(child, scope)
    elif isinstance(node, nodes.Continue) and (scope.part == "loop" or scope.inner):
        pass
    else:  # break, macros, call blocks, includes, extension tags, with, filter blocks...
        raise _Unproven(f"statement {type(node).__name__}")


def _targets(node: Any) -> None:
    """Assignment targets: plain names (never a namespace attribute, never a reserved name)."""
    from jinja2 import nodes

    if isinstance(node, nodes.Tuple):
        for item in node.items:
            _targets(item)
    elif not isinstance(node, nodes.Name) or node.name in _RESERVED:
        raise _Unproven("an assignment to a namespace or a reserved name")


def _expression(node: Any, scope: _Scope) -> None:
    from jinja2 import nodes

    named = node.node.name if isinstance(getattr(node, "node", None), nodes.Name) else None
    if isinstance(node, nodes.Name):
        _name(node.name, scope)
        return
    if isinstance(node, nodes.Getattr) and named == "loop" and not scope.inner:
        if scope.part != "loop" or node.attr != "first":
            raise _Unproven(f"loop.{node.attr}")
        return
    if isinstance(node, nodes.Getitem) and named == "messages":
        if not (isinstance(node.arg, nodes.Const) and node.arg.value == 0):
            raise _Unproven("messages read other than messages[0]")
        return
    if isinstance(node, nodes.Call) and named is not None and named not in _PURE_CALLS:
        raise _Unproven(f"a call of {named}")
    if isinstance(node, nodes.Filter) and (
        node.node is None
        or node.name in _IMPURE_FILTERS
        or any(isinstance(a, nodes.Const) and a.value in _IMPURE_FILTERS for a in node.args)
    ):
        raise _Unproven(f"filter {node.name}")
    if not isinstance(node, _EXPRESSIONS()):
        raise _Unproven(f"expression {type(node).__name__}")
    expression: Any = node
    for child in expression.iter_child_nodes():
        _expression(child, scope)


def _name(name: str, scope: _Scope) -> None:
    """A name read bare (not as ``messages[0]`` or ``loop.first``)."""
    if name == "messages":
        raise _Unproven("messages read other than messages[0]")
    if name in _IMPURE_NAMES:
        raise _Unproven(f"{name}: state across calls, chance or the clock")
    if name == "loop" and not scope.inner:  # the messages loop's, or none
        raise _Unproven("the messages loop's state read other than loop.first")
    if name == "add_generation_prompt" and scope.part != "closing":
        raise _Unproven("add_generation_prompt read before the closing")


@lru_cache(maxsize=1)
def _EXPRESSIONS() -> tuple[type, ...]:  # noqa: N802 - a constant, built on first use
    """Expression nodes whose value is their children's (checked one by one)."""
    from jinja2 import nodes

    return (
        nodes.Const, nodes.TemplateData, nodes.Getattr, nodes.Getitem, nodes.Slice,
        nodes.Filter, nodes.Test, nodes.Call, nodes.Compare, nodes.Operand, nodes.BinExpr,
        nodes.UnaryExpr, nodes.Concat, nodes.CondExpr, nodes.List, nodes.Tuple, nodes.Dict,
        nodes.Pair, nodes.Keyword,
    )  # fmt: skip
