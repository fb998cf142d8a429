"""A tokenizer's chat template is code from a file: render it in a sandbox with limits.

An ``hf:`` folder's ``chat_template.jinja`` (or a hub tokenizer's template) is
Jinja that anyone who can write the folder controls. ``transformers`` renders
it in jinja2's ``ImmutableSandboxedEnvironment`` (no attribute escapes, no
mutation), but with no bound on time or size: two nested ``range(100000)``
loops run for hours, and ``'x' * 4000000000`` allocates 4 GB (at compile time
already: Jinja folds constant expressions).

:func:`render_chat_template` renders with that same environment (its filters,
globals and extensions are taken from ``transformers``, so the text is the text
``apply_chat_template`` gives, which is what servers render) plus limits:

- **time**: :data:`TEMPLATE_SECONDS` of wall time, checked on every item of every
  ``{% for %}`` loop and on every call, filter and arithmetic operation (Jinja has
  no other way to repeat work: recursion goes through calls);
- **size**: :data:`TEMPLATE_CHARS` characters (or items) for any string or list
  the template builds with ``*``, ``+``, ``%``, ``**``, ``~``, a call or a filter,
  and for the output. Arithmetic is never folded at compile time; integer
  arguments above the bound and format widths of 8 digits or more are refused
  before the call runs (``ljust``, ``center``, ``indent``, ``format``, ...).

Over a limit: :class:`~phaseaware.errors.TemplateLimitError` naming the template.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any

from phaseaware.caches import register_cache
from phaseaware.errors import TemplateError, TemplateLimitError
from phaseaware.extras import install_line

__all__ = ["TEMPLATE_CHARS", "TEMPLATE_SECONDS", "parse_chat_template", "render_chat_template"]

#: wall-time bound of one render, seconds
TEMPLATE_SECONDS = 5.0
#: size bound of any string or list a template builds, and of its output (characters)
TEMPLATE_CHARS = 1 << 26
_CHECK_EVERY = 64  # loop items between two clock reads
_RENDER = threading.local()  # .until: the deadline of this thread's render (monotonic s)
# a format width or precision of 8 digits or more: over the bound
_WIDE_PERCENT = re.compile(r"%[-+ #0*]*(?:\d{8,}|\d*\.\d{8,})")
_WIDE_BRACE = re.compile(r"\{[^{}]*:[^{}]*\d{8,}[^{}]*\}")
#: filters whose integer arguments size their result
_SIZING_FILTERS = frozenset(
    {"center", "indent", "wordwrap", "truncate", "batch", "slice", "format"}
)
_SIZED = (str, bytes, list, tuple, dict)


class _Limit(Exception):
    """Raised inside the render; turned into TemplateLimitError with the template's name."""


def _tick() -> None:
    if time.monotonic() > getattr(_RENDER, "until", float("inf")):
        raise _Limit(f"it ran for more than {TEMPLATE_SECONDS:g} s")


def _bounded_iter(iterable: Iterable[Any]) -> Iterator[Any]:
    """``iterable``, with the deadline checked as a loop walks it."""
    _tick()
    for n, item in enumerate(iterable, 1):
        if n % _CHECK_EVERY == 0:
            _tick()
        yield item


def _check_size(value: Any, what: str) -> Any:
    if isinstance(value, _SIZED) and len(value) > TEMPLATE_CHARS:
        raise _Limit(f"{what} builds a value of {len(value):,} items (limit {TEMPLATE_CHARS:,})")
    return value


def _check_ints(args: Sequence[Any], kwargs: Mapping[str, Any], what: str) -> None:
    for value in (*args, *kwargs.values()):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > TEMPLATE_CHARS:
            raise _Limit(f"{what} is called with {value:,} (limit {TEMPLATE_CHARS:,})")


def _check_format(spec: object, what: str) -> None:
    if isinstance(spec, str) and (_WIDE_PERCENT.search(spec) or _WIDE_BRACE.search(spec)):
        raise _Limit(f"{what} is given a format width of 8 digits or more")


def _binop(left: Any, operator: str, right: Any) -> None:
    """Refuse before computing: a repeat or a power whose result is over the bound."""
    if operator == "*":
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, _SIZED) and isinstance(n, int) and len(seq) * n > TEMPLATE_CHARS:
                raise _Limit(f"'*' would build {len(seq) * n:,} items (limit {TEMPLATE_CHARS:,})")
    if (
        operator == "**"
        and isinstance(left, int)
        and isinstance(right, int)
        and right > 0
        and max(abs(left), 2).bit_length() * right > TEMPLATE_CHARS
    ):
        raise _Limit(f"'**' would build a number of about {left.bit_length() * right:,} bits")
    if operator == "%":
        _check_format(left, "'%'")
        if isinstance(left, str):  # '%*d' % (width, value)
            _check_ints(right if isinstance(right, tuple) else (right,), {}, "'%'")


@lru_cache(maxsize=1)
def _base_environment() -> Any:
    """transformers' own chat-template environment (filters, globals, extensions)."""
    try:
        from transformers.utils.chat_template_utils import _compile_jinja_template

        return _compile_jinja_template("").environment
    except (ImportError, AttributeError) as exc:  # pragma: no cover - another transformers
        raise TemplateError(
            "rendering a chat template needs transformers' chat-template environment "
            f"({exc}); install transformers>=4.45: {install_line('hf')}"
        ) from exc


def parse_chat_template(source: str) -> Any:
    """The Jinja syntax tree (``jinja2.nodes.Template``) of ``source``, parsed as
    ``apply_chat_template`` parses it (transformers' extensions included); raises
    :class:`TemplateError` for a template that does not parse."""
    try:
        return _base_environment().parse(source)
    except TemplateError:
        raise
    except Exception as exc:  # jinja's syntax errors
        raise TemplateError(f"chat template does not parse: {exc}") from exc


def _bounded_environment() -> Any:
    from jinja2.compiler import CodeGenerator

    class BoundedCodeGenerator(CodeGenerator):
        def visit_Concat(self, node: Any, frame: Any) -> None:  # '~': size checked
            self.write("environment.bounded_concat(")
            super().visit_Concat(node, frame)
            self.write(")")

        def visit_For(self, node: Any, frame: Any) -> None:  # the loop's iterable: timed
            self.__dict__.setdefault("loop_iterables", set()).add(id(node.iter))
            super().visit_For(node, frame)

        def visit(self, node: Any, *args: Any, **kwargs: Any) -> Any:
            if id(node) not in self.__dict__.get("loop_iterables", ()):
                return super().visit(node, *args, **kwargs)
            self.write("environment.bounded_iter(")
            super().visit(node, *args, **kwargs)
            self.write(")")
            return None

    base = _base_environment()
    env = base.overlay()
    env.code_generator_class = BoundedCodeGenerator
    env.intercepted_binops = frozenset({"*", "**", "%", "+"})  # never folded at compile time
    base_call = env.call

    def call_binop(context: Any, operator: str, left: Any, right: Any) -> Any:
        _tick()
        _binop(left, operator, right)
        return _check_size(env.binop_table[operator](left, right), f"{operator!r}")

    def call(context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        _tick()  # macros recurse through calls
        what = f"{getattr(obj, '__name__', type(obj).__name__)}()"
        owner = getattr(obj, "__self__", None)
        if isinstance(owner, _SIZED):  # str.ljust(n), str.format(...), list.__mul__ ...
            _check_ints(args, kwargs, what)
            _check_format(owner, what)
        return _check_size(base_call(context, obj, *args, **kwargs), what)

    def bounded_filter(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            _tick()
            if name in _SIZING_FILTERS:
                _check_ints(args, kwargs, f"filter {name!r}")
            if name == "format":
                for value in args:
                    _check_format(value, "filter 'format'")
            return _check_size(function(*args, **kwargs), f"filter {name!r}")

        for flag in ("jinja_pass_arg",):  # pass_context / pass_environment markers
            if hasattr(function, flag):
                setattr(run, flag, getattr(function, flag))
        return run

    base_wrap = env.wrap_str_format

    def wrap_str_format(value: Any) -> Callable[..., str] | None:  # 'x'.format(...)
        wrapped = base_wrap(value)
        if wrapped is None:
            return None
        _check_format(value.__self__, "format()")

        def checked(*args: Any, **kwargs: Any) -> str:
            _check_ints(args, kwargs, "format()")  # nested widths: '{:{w}}'.format(w=...)
            return str(_check_size(wrapped(*args, **kwargs), "format()"))

        return checked

    env.wrap_str_format = wrap_str_format
    env.call_binop = call_binop
    env.call = call
    env.bounded_concat = lambda value: _check_size(value, "'~'")
    env.bounded_iter = _bounded_iter
    env.filters = {name: bounded_filter(name, f) for name, f in base.filters.items()}
    return env


@lru_cache(maxsize=16)
def _compiled(source: str) -> Any:
    return _bounded_environment().from_string(source)


register_cache(
    "tokenizers.chat_templates",
    size=lambda: (_compiled.cache_info().currsize, None),
    clear=_compiled.cache_clear,
    bound="LRU, 16 compiled chat templates",
)


def _aliased(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages as transformers hands them to a template (reasoning under every name it
    reads, where this transformers version does so)."""
    plain = [dict(m) for m in messages]
    try:
        from transformers.utils.chat_template_utils import _alias_reasoning_fields
    except ImportError:  # older transformers: messages as given
        return plain
    return list(_alias_reasoning_fields(plain))


def render_chat_template(
    source: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    name: str,
    special_tokens: Mapping[str, Any],
    add_generation_prompt: bool,
    **kwargs: Any,
) -> str:
    """``apply_chat_template(messages, tokenize=False, ...)`` of ``source``, within the
    limits of the module doc. ``name`` names the template in errors (the tokenizer spec).

    Raises :class:`TemplateLimitError` over a limit and :class:`TemplateError` for a
    template that fails (a Jinja error, ``raise_exception``).
    """
    _RENDER.until = time.monotonic() + TEMPLATE_SECONDS
    try:
        template = _compiled(source)
        variables = {**special_tokens, **kwargs}
        # as transformers passes them: bound tools (None when there are none), no documents
        tools = variables.pop("tools", None) or None
        documents = variables.pop("documents", None) or None
        pieces: list[str] = []
        total = 0
        for piece in template.generate(
            messages=_aliased(messages),
            tools=None if tools is None else list(tools),
            documents=documents,
            add_generation_prompt=add_generation_prompt,
            **variables,
        ):
            total += len(piece)
            if total > TEMPLATE_CHARS:
                raise _Limit(f"its output passes {TEMPLATE_CHARS:,} characters")
            pieces.append(piece)
    except _Limit as exc:
        raise TemplateLimitError(
            f"chat template of {name!r} is over a limit: {exc}; check the template "
            "(chat_template.jinja of the tokenizer folder) or use chat format chatml, "
            "deepseek-v4 or none"
        ) from None
    except RecursionError:
        raise TemplateLimitError(
            f"chat template of {name!r} recurses without end; check the template"
        ) from None
    except MemoryError:
        raise TemplateLimitError(
            f"chat template of {name!r} ran out of memory; check the template"
        ) from None
    except Exception as exc:  # jinja errors come in many types
        raise TemplateError(f"chat template of {name!r} failed: {exc}") from exc
    finally:
        _RENDER.until = float("inf")
    return "".join(pieces)
