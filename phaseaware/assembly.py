"""Token-exact, phase-aware assembly of retrieved chunks into one prompt.

``assemble`` tokenizes all chunks once (in one call, each in the context it
will have: after a separator, followed by one), plans (``planner``), renders the
prompt through the layout, tokenizes the final prompt once and measures where
every key token landed (char offset of the key in the prompt → token, via
``TokenizedText.token_at_char``). It then re-plans from the *measured* base
positions; if the plan is unchanged (a fixed point) the placement is
confirmed, otherwise the changed pads are rendered and measured again. After
``max_repair_rounds`` rounds, chunks whose padding still moves are frozen
unpadded; if no fixed point is reached then, ``VerificationError``. Reported
positions, residues and token counts are always the measured ones.

Context layout (``SEP`` = ``"\\n\\n"``)::

    [pad] chunk_1 SEP [pad] chunk_2 SEP ... [pad] chunk_n [SEP repeat-block] [end pad]

    pad = filler_unit * k + "\n"    end pad = "\n" + filler_unit * k

Invariants: every admitted chunk text appears verbatim once (plus the declared
repeat); ``token_count <= budget_tokens``; same input → byte-identical output;
caller objects are never mutated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from phaseaware import planner
from phaseaware.assembly_result import (
    AssemblyOptions,
    AssemblyResult,
    Placement,
    RepeatPlacement,
    build_result,
)
from phaseaware.chunks import (
    NO_PAD,
    Chunk,
    MeasuredChunk,
    chunk_pad_tables,
    measure_chunks,
    normalize_chunks,
)
from phaseaware.errors import BudgetError, InputError, TemplateError, VerificationError
from phaseaware.evidence import (
    evidence_snippet,
    question_terms,
)
from phaseaware.filler import (
    CHUNK_SEPARATOR,
    Filler,
    PadTable,
    end_pad,
    find_filler,
    measure_end_pad,
    pad_block,
)
from phaseaware.layouts import PromptLayout
from phaseaware.profile import Profile
from phaseaware.tokenizers.base import TokenizedText, Tokenizer

__all__ = [
    "AssemblyOptions",
    "AssemblyResult",
    "Placement",
    "RepeatPlacement",
    "assemble",
    "assemble_from_specs",
]


@dataclass(frozen=True)
class _Repeat:
    index: int  # input index of the repeated chunk
    text: str  # label + snippet
    key_chars: tuple[int, ...]  # offsets in ``text``


@dataclass(frozen=True)
class _Plan:
    order: tuple[int, ...]  # input indices, context order
    pads: tuple[int, ...]  # filler units before each ordered chunk
    repeat: _Repeat | None
    end_k: int


@dataclass(frozen=True)
class _Rendered:
    context: str
    chunk_starts: tuple[int, ...]  # char offset of each ordered chunk in the context
    pad_spans: tuple[tuple[int, int], ...]
    repeat_start: int | None
    end_span: tuple[int, int] | None


@dataclass(frozen=True)
class _Setup:
    tokenizer: Tokenizer
    layout: PromptLayout
    system: str | None
    question: str
    prefix: str
    suffix: str
    n_prefix: int
    n_suffix: int
    sep_tokens: int
    budget: int
    profile: Profile | None
    options: AssemblyOptions
    filler: Filler | None  # None: padding off or no profile
    end_table: PadTable | None  # None: no length-residue correction
    prepared: tuple[MeasuredChunk, ...]
    weights: tuple[float, ...]
    chunk_tables: tuple[PadTable, ...]  # tokens added by k units before each input chunk

    def table(self, index: int) -> PadTable:
        return self.chunk_tables[index]


def assemble(
    chunks: Sequence[Chunk | str],
    *,
    tokenizer: Tokenizer,
    layout: PromptLayout,
    question: str,
    system: str | None = None,
    profile: Profile | None = None,
    budget_tokens: int,
    options: AssemblyOptions | None = None,
) -> AssemblyResult:
    """Assemble ``chunks`` into a prompt of at most ``budget_tokens`` tokens.

    Raises ``InputError`` (empty chunk list, bad evidence, bad options),
    ``BudgetError`` (budget below the template + question),
    ``FingerprintMismatchError``/``PeriodMismatchError`` (profile vs tokenizer
    or ``options.period``) and ``VerificationError`` (placement not confirmed).
    """
    options = options if options is not None else AssemblyOptions()
    setup = _setup(chunks, tokenizer, layout, question, system, profile, budget_tokens, options)
    dropped: dict[int, str] = {}
    admission = planner.admit(
        scores=[p.chunk.score for p in setup.prepared],
        costs=[p.tokens for p in setup.prepared],
        empty=[p.empty for p in setup.prepared],
        budget_left=max(0, setup.budget - setup.n_prefix - setup.n_suffix - _end_reserve(setup)),
    )
    dropped.update(admission.dropped)
    admitted = list(admission.admitted)
    if not admitted:
        return _finish(setup, None, None, None, dropped)
    while admitted:
        plan = _initial_plan(setup, admitted)
        setup, plan, rendered, measured = _verify(setup, plan)
        if len(measured) <= setup.budget:
            return _finish(setup, plan, rendered, measured, dropped)
        # Boundary merges made the prompt longer than estimated: drop the least relevant.
        dropped[admitted.pop()] = (
            f"over budget: the prompt measured {len(measured)} tokens with it, "
            f"budget is {setup.budget}"
        )
    return _finish(setup, None, None, None, dropped)


def _setup(chunks, tokenizer, layout, question, system, profile, budget, options) -> _Setup:
    from phaseaware.registry import check_period, check_tokenizer

    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise InputError(f"budget_tokens must be a positive int, got {budget!r}")
    normalized = normalize_chunks(chunks)
    if profile is not None:
        check_tokenizer(profile, tokenizer, allow_mismatch=options.allow_tokenizer_mismatch)
        if options.period is not None:
            check_period(profile, options.period)
    prefix, suffix = layout.split(system=system, question=question)
    n_prefix, n_suffix = len(tokenizer.encode(prefix)), len(tokenizer.encode(suffix))
    if n_prefix + n_suffix > budget:
        raise BudgetError(
            f"budget_tokens={budget} cannot hold the template, system prompt and question "
            f"({n_prefix + n_suffix} tokens); raise budget_tokens to at least "
            f"{n_prefix + n_suffix + 1} or shorten the question"
        )
    terms = question_terms(question)
    prepared = measure_chunks(
        normalized, tokenizer=tokenizer, terms=terms, max_keys=options.max_keys_per_chunk
    )
    filler = end_table = None
    if profile is not None and (options.pad or options.length_pad):
        filler = find_filler(tokenizer, period=profile.period)
        max_k = _end_pad_reach(profile, options)
        if max_k:
            end_table = measure_end_pad(
                tokenizer,
                unit=filler.unit,
                period=profile.period,
                context_tail="the end.",
                suffix=suffix,
                max_k=max_k,
            )
    return _Setup(
        tokenizer=tokenizer, layout=layout, system=system, question=question,
        prefix=prefix, suffix=suffix, n_prefix=n_prefix, n_suffix=n_suffix,
        sep_tokens=len(tokenizer.encode(CHUNK_SEPARATOR)), budget=budget, profile=profile,
        options=options, filler=filler if options.pad or end_table else None,
        end_table=end_table, prepared=prepared,
        weights=planner.relevance_weights([c.score for c in normalized]),
        chunk_tables=chunk_pad_tables(tokenizer, filler if options.pad else None, prepared),
    )  # fmt: skip


def _end_pad_reach(profile: Profile, options: AssemblyOptions) -> int:
    """Largest end pad (filler units) worth trying; 0: no end pad.

    The end pad moves the prompt length's residue (``length_pad`` with a
    length effect in the profile: up to two periods) and pushes keys out of
    the raw local window (``pad``, when the profile measured the window worse
    than the best residue: up to the window plus a period).
    """
    reach = 0
    effect = profile.length_residue_accuracy
    if options.length_pad and effect is not None:
        reach = 2 * effect.period
    window = profile.local_window
    if (
        options.pad
        and window is not None
        and profile.window_reliability() < profile.best_reliability()
    ):
        reach = max(reach, window + profile.period)
    return reach


def _end_reserve(setup: _Setup) -> int:
    """Tokens kept free for the end pad of a length-residue correction."""
    effect = setup.profile.length_residue_accuracy if setup.profile is not None else None
    if setup.end_table is None or effect is None or not setup.options.length_pad:
        return 0
    return max(setup.end_table.shifts[: effect.period])


def _initial_plan(setup: _Setup, admitted: Sequence[int]) -> _Plan:
    """Order, repeat and pads from the in-context token counts (verified later)."""
    scores = [p.chunk.score for p in setup.prepared]
    order = planner.order_chunks(
        admitted=admitted,
        scores=scores,
        strategy=setup.options.strategy,
        has_profile=setup.profile is not None,
    )
    base = _estimated_base(setup, order)
    used = setup.n_prefix + setup.n_suffix + base[1] + _end_reserve(setup)
    repeat = _choose_repeat(setup, order, base[0], used)
    if repeat is not None:
        used += setup.sep_tokens + len(setup.tokenizer.encode(repeat.text))
    length, slack = used - _end_reserve(setup), setup.budget - used
    profile = setup.profile
    if (
        setup.options.strategy == "reorder"
        and profile is not None
        and setup.filler is not None
        and setup.options.pad
    ):
        prep = setup.prepared
        evaluate = planner.order_scorer(
            start=setup.n_prefix + setup.options.position_offset,
            sizes=[p.tokens for p in prep],
            key_offsets=[p.key_tokens for p in prep],
            weights=setup.weights,
            residue_reliability=[profile.residue_reliability(r) for r in range(profile.period)],
            pad_tables=setup.chunk_tables,
            pad_cost=setup.options.pad_cost,
        )
        order = planner.search_orders(order=order, evaluate=evaluate)
        base = _estimated_base(setup, order)
    pads, end_k = _choose_pads(setup, order, base[0], length=length, slack=slack)
    return _Plan(order=order, pads=pads, repeat=repeat, end_k=end_k)


def _estimated_base(setup: _Setup, order: Sequence[int]) -> tuple[list[tuple[int, ...]], int]:
    """Key positions with no padding (from in-context counts) and context tokens."""
    keys: list[tuple[int, ...]] = []
    pos = setup.n_prefix
    for i in order:
        keys.append(tuple(pos + t for t in setup.prepared[i].key_tokens))
        pos += setup.prepared[i].tokens
    return keys, pos - setup.n_prefix - setup.sep_tokens  # the last chunk has no separator


def _choose_repeat(setup: _Setup, order, base_keys, used: int) -> _Repeat | None:
    """Restate the top chunk's evidence before the question, if useful and affordable."""
    if not setup.options.repeat:
        return None
    ranked = sorted(order, key=lambda i: (-setup.prepared[i].chunk.score, i))
    top = next((i for i in ranked if setup.prepared[i].key_chars), None)
    if top is None:
        return None
    profile = setup.profile
    window = profile.local_window if profile is not None else None
    if window is not None:
        length = used - _end_reserve(setup)
        top_keys = base_keys[order.index(top)]
        if all(length - t <= window for t in top_keys):
            return None  # already read raw in the local window
    prep = setup.prepared[top]
    text = prep.chunk.text
    start, end = evidence_snippet(text, prep.key_chars[0], max_chars=setup.options.repeat_max_chars)
    label = setup.options.repeat_label
    block = label + text[start:end]
    keys = tuple(len(label) + c - start for c in prep.key_chars if start <= c < end)
    cost = setup.sep_tokens + len(setup.tokenizer.encode(block))
    if used + cost > setup.budget:
        return None
    if window is not None and cost + setup.n_suffix > window:
        return None  # would not sit in the raw window anyway
    return _Repeat(index=top, text=block, key_chars=keys)


def _choose_pads(setup: _Setup, order, base_keys, *, length: int, slack: int):
    """(pads per ordered chunk, end-pad k) for key positions ``base_keys`` (no padding)."""
    _, pads, end_k = _best_pads(setup, order, base_keys, length=length, slack=slack)
    return pads, end_k


def _best_pads(
    setup: _Setup, order, base_keys, *, length: int, slack: int
) -> tuple[float, tuple[int, ...], int]:
    """(value, pads, end-pad k): the best plan for this order.

    Tries each end pad the slack allows (when the profile makes one useful)
    and keeps the plan with the best ``length factor × key reliability − pad
    cost``. Chunks whose keys no end pad can bring within the raw window are
    padded once; only the chunks near the end are re-planned per end pad.
    """
    profile = setup.profile
    if profile is None:
        return 0.0, tuple(0 for _ in order), 0
    offset = setup.options.position_offset
    rel = _reliability(profile, offset)
    weights = [setup.weights[i] for i in order]
    tables = [setup.table(i) for i in order]
    padding = setup.filler is not None and setup.options.pad
    total_slack = max(0, slack) + _end_reserve(setup)
    tails = [(0, 0)]
    if setup.end_table is not None:
        tails = [(k, s) for k, s in enumerate(setup.end_table.shifts) if s <= total_slack]
    window = profile.local_window
    split = len(order)
    if window is not None:
        reach = window + max(s for _, s in tails)
        split = next(
            (j for j, keys in enumerate(base_keys) if any(length - t <= reach for t in keys)),
            len(order),
        )

    def pads_for(j0: int, j1: int, shift: int, tail: int, room: int) -> tuple[int, ...]:
        if not padding or j0 == j1:
            return tuple(0 for _ in range(j0, j1))
        return planner.choose_pads(
            key_positions=[tuple(t + shift for t in keys) for keys in base_keys[j0:j1]],
            weights=weights[j0:j1],
            period=profile.period,
            reliability=rel,
            pad_tables=tables[j0:j1],
            pad_cost=setup.options.pad_cost,
            slack=max(0, room),
            length=length + shift,
            tail=tail,
            window=window,
        )

    def value_of(j0: int, j1: int, pads, shift: int, tail: int) -> float:
        return planner.pads_value(
            key_positions=[tuple(t + shift for t in keys) for keys in base_keys[j0:j1]],
            weights=weights[j0:j1],
            reliability=rel,
            shifts=[table.shifts[k] for table, k in zip(tables[j0:j1], pads, strict=True)],
            length=length + shift,
            tail=tail,
        )

    head = pads_for(0, split, 0, 0, total_slack)
    head_shift = sum(table.shifts[k] for table, k in zip(tables, head, strict=False))
    head_value = value_of(0, split, head, 0, 0)
    best: tuple[float, tuple[int, ...], int] | None = None
    for end_k, tail in tails:
        room = total_slack - head_shift - tail
        if room < 0:
            continue
        rest = pads_for(split, len(order), head_shift, tail, room)
        added = head_shift + tail
        added += sum(table.shifts[k] for table, k in zip(tables[split:], rest, strict=True))
        value = head_value + value_of(split, len(order), rest, head_shift, tail)
        factor = profile.length_factor(length + added + offset)
        value = factor * value - setup.options.pad_cost * added
        if best is None or value > best[0] + 1e-12:
            best = (value, head + rest, end_k)
    if best is None:  # the head took the slack the end pads need
        return 0.0, head + tuple(0 for _ in range(split, len(order))), 0
    return best


def _reliability(profile: Profile | None, offset: int = 0) -> Callable[[int, int], float]:
    """Reliability of a key token at ``(position, distance to the prompt's end)``.

    ``position`` indexes the prompt's tokens; the model sees it at ``position +
    offset`` (tokens its server adds first, e.g. a BOS). Equals
    ``profile.position_reliability(t + offset, prompt_length=t + offset + d)``
    without the length factor (a unit test checks this), from per-residue
    tables so planning stays O(1) per key. Without a profile: the
    lost-in-the-middle heuristic.
    """
    if profile is None:
        return lambda t, d: planner.default_position_reliability(t, prompt_length=t + d)
    period, window = profile.period, profile.local_window
    values = [profile.residue_reliability(r + offset) for r in range(period)]
    inside = profile.window_reliability()

    def reliability(t: int, d: int) -> float:
        if window is not None and d <= window:
            return inside
        return values[t % period]

    return reliability


def _position_reliability(
    profile: Profile | None, length: int, offset: int = 0
) -> Callable[[int], float]:
    """Expected accuracy of a key at token t of a ``length``-token prompt.

    Equals ``profile.position_reliability(min(t, length - 1) + offset,
    prompt_length=length + offset)`` (a unit test checks this); the
    lost-in-the-middle heuristic without a profile.
    """
    rel = _reliability(profile, offset)
    factor = profile.length_factor(length + offset) if profile is not None else 1.0
    last = length - 1

    def at(t: int) -> float:
        t = min(t, last)
        return rel(t, length - t) * factor

    return at


def _render(setup: _Setup, plan: _Plan) -> _Rendered:
    parts: list[str] = []
    pos = 0
    starts: list[int] = []
    pad_spans: list[tuple[int, int]] = []
    unit = setup.filler.unit if setup.filler is not None else ""
    for j, (i, k) in enumerate(zip(plan.order, plan.pads, strict=True)):
        if j:
            parts.append(CHUNK_SEPARATOR)
            pos += len(CHUNK_SEPARATOR)
        if k:
            pad = pad_block(unit, k)
            pad_spans.append((pos, pos + len(pad)))
            parts.append(pad)
            pos += len(pad)
        starts.append(pos)
        parts.append(setup.prepared[i].chunk.text)
        pos += len(setup.prepared[i].chunk.text)
    repeat_start = None
    if plan.repeat is not None:
        parts.append(CHUNK_SEPARATOR)
        repeat_start = pos + len(CHUNK_SEPARATOR)
        parts.append(plan.repeat.text)
        pos = repeat_start + len(plan.repeat.text)
    end_span = None
    if plan.end_k:
        pad = end_pad(unit, plan.end_k)
        end_span = (pos, pos + len(pad))
        parts.append(pad)
    return _Rendered("".join(parts), tuple(starts), tuple(pad_spans), repeat_start, end_span)


def _verify(setup: _Setup, plan: _Plan) -> tuple[_Setup, _Plan, _Rendered, TokenizedText]:
    """Render, tokenize, re-plan from measured positions until the plan is a fixed point.

    After ``max_repair_rounds`` rounds, chunks whose padding still moves are
    frozen unpadded (and the end pad dropped if it moves), then checked again.
    """
    rounds = setup.options.max_repair_rounds
    for round_ in range(rounds + 3):
        rendered = _render(setup, plan)
        measured = setup.tokenizer.tokenize(setup.prefix + rendered.context + setup.suffix)
        base_keys = _measured_base(setup, plan, rendered, measured)
        length = len(measured) - _pad_tokens(setup, plan)
        slack = setup.budget - length - _end_reserve(setup)
        pads, end_k = _choose_pads(setup, plan.order, base_keys, length=length, slack=slack)
        if pads == plan.pads and end_k == plan.end_k:
            return setup, plan, rendered, measured
        if round_ >= rounds:
            setup = _freeze(setup, plan, pads, end_k)  # base_keys stay measured ones
            pads, end_k = _choose_pads(setup, plan.order, base_keys, length=length, slack=slack)
        plan = _Plan(order=plan.order, pads=pads, repeat=plan.repeat, end_k=end_k)
    ids = [setup.prepared[i].chunk.id for i in plan.order]
    raise VerificationError(
        f"re-tokenization did not confirm the padding of chunks {ids} after "
        f"{rounds} repair rounds (tokens merge across chunk boundaries); assemble with "
        "AssemblyOptions(pad=False) or start the chunks with a letter or digit"
    )


def _freeze(setup: _Setup, plan: _Plan, pads, end_k: int) -> _Setup:
    """Setup where the chunks (and end pad) whose padding still moves get no padding."""
    tables = list(setup.chunk_tables)
    for i, old, new in zip(plan.order, plan.pads, pads, strict=True):
        if old != new:
            tables[i] = NO_PAD
    end_table = setup.end_table if end_k == plan.end_k else None
    return dataclasses.replace(setup, chunk_tables=tuple(tables), end_table=end_table)


def _pad_tokens(setup: _Setup, plan: _Plan) -> int:
    if setup.filler is None:
        return 0
    total = sum(setup.table(i).shifts[k] for i, k in zip(plan.order, plan.pads, strict=True))
    if setup.end_table is not None:
        total += setup.end_table.shifts[plan.end_k]
    return total


def _measured_base(setup, plan, rendered, measured) -> list[tuple[int, ...]]:
    """Measured key positions minus the planned shift of the pads before each key."""
    offset = len(setup.prefix)
    out: list[tuple[int, ...]] = []
    shift = 0
    for i, k, start in zip(plan.order, plan.pads, rendered.chunk_starts, strict=True):
        shift += setup.table(i).shifts[k]
        keys = setup.prepared[i].key_chars
        out.append(tuple(measured.token_at_char(offset + start + c) - shift for c in keys))
    return out


def _finish(setup, plan, rendered, measured, dropped) -> AssemblyResult:
    if plan is None:
        context = ""
        rendered_prompt = setup.layout.render(
            system=setup.system, context=context, question=setup.question
        )
        measured = setup.tokenizer.tokenize(rendered_prompt.text)
    else:
        rendered_prompt = setup.layout.render(
            system=setup.system, context=rendered.context, question=setup.question
        )
        if rendered_prompt.text != setup.prefix + rendered.context + setup.suffix:
            raise TemplateError(
                f"layout {setup.layout.name!r} rendered a prompt that is not prefix + context "
                "+ suffix; use another --template"
            )
    return build_result(setup, plan, rendered, measured, rendered_prompt, dropped)


def assemble_from_specs(
    chunks: Sequence[Chunk | str],
    *,
    tokenizer: str | Tokenizer,
    layout: str | PromptLayout = "none",
    question: str,
    system: str | None = None,
    profile: str | Profile | None = None,
    budget_tokens: int,
    options: AssemblyOptions | None = None,
    thinking: bool = False,
) -> AssemblyResult:
    """``assemble`` with a tokenizer spec, layout name and profile name/path accepted.

    ``thinking`` selects the thinking variant of the layout (``deepseek-v4``, ``hf``).
    """
    from phaseaware.layouts import get_layout
    from phaseaware.registry import get_profile
    from phaseaware.tokenizers import load_tokenizer

    tok = load_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
    lay = get_layout(layout, tok, thinking=thinking) if isinstance(layout, str) else layout
    prof = get_profile(profile) if isinstance(profile, str) else profile
    return assemble(
        chunks,
        tokenizer=tok,
        layout=lay,
        question=question,
        system=system,
        profile=prof,
        budget_tokens=budget_tokens,
        options=options,
    )
