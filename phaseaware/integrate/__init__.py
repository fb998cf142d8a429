"""The integration kit: everything a framework adapter needs, so that it only converts types.

An adapter (LangChain, LlamaIndex, ...) calls, in order:

1. :func:`resolve_target` once, in its constructor (:func:`target_of` over its
   ``**target: Unpack[TargetArgs]``, the keyword family typed once): its arguments as one
   :class:`~phaseaware.AssemblyRequest` (tokenizer, chat format, profile, budget,
   options, settings) plus the endpoint record, checked, in one frozen :class:`Target`
   (every adapter names it ``target``; :func:`target_keywords` shows it in a ``repr``).
2. in agent loops, per model call: :func:`step_index` (which message aligns) and
   :func:`align_step` (its documents, the question, bound tools, the report) under one
   :class:`AgentPolicy` (see :mod:`.agent`: the whole agent-step policy);
   :class:`AgentStepper` holds one adapter's step state (:mod:`.stepper`); before the
   step, :class:`CallNeutralizer` breaks the control strings the model wrote into its
   text, reasoning and tool calls, as in any untrusted text (the rule: :mod:`.neutral`;
   :mod:`.made`: the adapter rebuilds the message and sends the rebuilt one), and :class:`ResultNeutralizer` those
   in the tool results the step sends unaligned (:mod:`.results`).
3. per call, its retrieved items as :class:`SourceRecord` values (text, score or
   ``None``, its own id, evidence), then :func:`conversation` (its messages as a
   layout; a framework that formats its own template: :func:`slot_marker` and
   :func:`fill_slot`, :mod:`.slot`) and :func:`assemble_records`, or, in agent loops,
   :func:`append_records` (which is :func:`phaseaware.assemble_append` itself).
   :mod:`.readers` reads message content, tool calls and metadata one way;
   A ranker (Haystack's ``LostInTheMiddleRanker`` drop-in) selects with
   :func:`rank_records` (``top_k``, a token budget, then the reorder; :mod:`.rank`).
   :func:`record_chunks` / :func:`merge_records` hold the one rule for missing scores
   and duplicate ids (copies merged, the merge in ``result.merged_duplicates``; see
   :mod:`.records`).
4. :func:`placement_report` (``AssemblyResult.to_dict()`` plus each record's index
   and id) and :func:`placed_records` to map the result back to its framework objects.
   A compressor, which sees no messages, calls :func:`fixed_prompt` once and
   :meth:`FixedPrompt.compress` per call instead (:mod:`.compress`).
5. after the model call, :func:`check_usage` (or :func:`check_raw_usage` on a raw
   OpenAI-style response, :class:`UsagePlans` for a callback, :class:`ReplyStore` for the
   reply bodies a callback never sees, :class:`StreamedReply` for a streamed reply's;
   see :mod:`.checks`, :mod:`.replies`, :mod:`.streamed`) (planned vs reported prompt tokens; the
   fix names the adapter's own parameter) and :func:`rendered_tokens` for messages
   it did not plan; ``Target.with_tools`` for a request that binds tools (the format
   renders their schemas, or refuses them with ``UnsupportedSettingError``).
   ``Target.request_kwargs()`` on every model call: the chat settings the plan was
   made with (``extra_body.chat_template_kwargs``), so no server default renders it.
   A synthesis step sends the plan its records carry (:func:`carried_plan`, :mod:`.sent`;
   :func:`assemble_carried`, :func:`plan_to_send`, the template's placeholders:
   :mod:`.synthesis`).

Adapters import ``phaseaware`` (its ``__all__``), ``phaseaware.errors`` and this
package only; the types their signatures name are re-exported here.

What a third adapter would need (estimate). Haystack: a component whose ``run``
takes ``documents: list[Document]`` and ``query``: ``Document.content`` / ``.score``
/ ``.id`` / ``.meta["evidence"]`` to ``SourceRecord`` (about 10 lines), its
``ChatMessage`` list to OpenAI-style dicts (``role.value``, ``text``; about 15 lines),
and ``AssemblyResult.messages`` back to ``ChatMessage`` objects (about 5 lines): one
module of roughly 80-120 lines with the constructor, no policy. DSPy: a module that
takes the retrieved passages (strings, no scores: retrieval order under the
missing-score rule) and the signature's rendered messages, calls
:func:`assemble_records`, and hands ``result.messages`` to the LM; the same size.
Usage checks read the response's ``usage.prompt_tokens`` with
:func:`reported_prompt_tokens` (re-exported here) and call :func:`check_usage`.
"""

from __future__ import annotations

from phaseaware.assembly.inputs.options import check_position_offset
from phaseaware.assembly.inputs.request import AssemblyRequest
from phaseaware.assembly.prepare.render import CHUNK_SEPARATOR
from phaseaware.chat.errors import DuplicateSlotError, MissingSlotError
from phaseaware.chat.formats import ChatFormat
from phaseaware.chat.messages import ROLES
from phaseaware.chat.settings import ChatSettings, UnsupportedSettingError
from phaseaware.endpoints import EndpointRecord, EndpointRef, UsageCheck, reported_prompt_tokens
from phaseaware.integrate.agent import (
    REPORT_KEY,
    AgentPolicy,
    AgentStep,
    MessageMemo,
    ParallelToolResultsWarning,
    SentMemory,
    UnalignedToolResultWarning,
    align_step,
    model_view,
    question_of,
    split_documents,
    step_index,
    step_report,
)
from phaseaware.integrate.args import TargetArgs, TargetOptions, target_keywords, target_of
from phaseaware.integrate.calls import (
    FixedLayout,
    OnMismatch,
    append_records,
    assemble_records,
    check_on_mismatch,
    check_usage,
    conversation,
    refuse_tools,
    rendered_ids,
    rendered_tokens,
    reported_identity,
)
from phaseaware.integrate.checks import (
    UsagePlans,
    check_fixed_prompt,
    check_raw_usage,
    check_tool_schemas,
    require_chat,
    then_last,
    then_last_async,
    tools_fix,
)
from phaseaware.integrate.compress import (
    SUMMARY_KEYS,
    CompressedRecord,
    FixedPrompt,
    fixed_prompt,
)
from phaseaware.integrate.inputs import (
    CONTEXT_VARIABLE,
    check_context_variable,
    template_inputs,
)
from phaseaware.integrate.made import (
    CallNeutralizer,
    NeutralizedAssistantTextWarning,
    NeutralizedToolCallWarning,
)
from phaseaware.integrate.neutral import (
    NeutralCall,
    NeutralText,
    neutral_calls,
    neutral_messages,
    neutral_result,
    neutral_text,
    scanner_of,
)
from phaseaware.integrate.rank import check_limit, rank_records
from phaseaware.integrate.readers import (
    EVIDENCE_KEY,
    SCORE_KEYS,
    content_text,
    metadata_record,
    tool_call_dict,
)
from phaseaware.integrate.records import (
    CHUNK_ID_PREFIX,
    RecordChunks,
    SourceRecord,
    merge_records,
    record_chunks,
    record_index,
    relevance_scores,
)
from phaseaware.integrate.reorder import UnusableScoreWarning, reorder_profile, reorder_records
from phaseaware.integrate.replies import KeptReply, ReplyStore
from phaseaware.integrate.report import (
    PlacedRecord,
    placed_records,
    placement_report,
    stale_reason,
)
from phaseaware.integrate.results import NeutralizedToolResultWarning, ResultNeutralizer
from phaseaware.integrate.sent import PlanSent, carried_plan, replan_warning
from phaseaware.integrate.slot import FilledSlot, fill_slot, slot_marker
from phaseaware.integrate.stepper import AgentStepper
from phaseaware.integrate.streamed import StreamedReply
from phaseaware.integrate.synthesis import (
    ASSEMBLY_KEY,
    CARRIED_KEYS,
    PLACEHOLDERS,
    PLACEMENT_KEY,
    CarriedAssembly,
    assemble_carried,
    carried_metadata,
    carried_text,
    plan_to_send,
    reply_prompt_tokens,
    tagged_conversation,
)
from phaseaware.integrate.target import (
    APPEND_OPTIONS,
    Target,
    call_effort,
    record_settings,
    resolve_options,
    resolve_settings,
    resolve_target,
)
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    # the types and errors an adapter's signatures and checks name (re-exported)
    "AssemblyRequest",
    "ChatFormat",
    "ChatSettings",
    "DuplicateSlotError",
    "EndpointRecord",
    "EndpointRef",
    "MissingSlotError",
    "Tokenizer",
    "UnsupportedSettingError",
    "UsageCheck",
    "check_position_offset",
    "reported_prompt_tokens",
    # the kit
    "REPORT_KEY",
    "AgentPolicy",
    "AgentStep",
    "MessageMemo",
    "NeutralCall",
    "NeutralText",
    "NeutralizedAssistantTextWarning",
    "NeutralizedToolCallWarning",
    "NeutralizedToolResultWarning",
    "ParallelToolResultsWarning",
    "SentMemory",
    "UnalignedToolResultWarning",
    "align_step",
    "model_view",
    "question_of",
    "split_documents",
    "step_index",
    "step_report",
    "APPEND_OPTIONS",
    "CHUNK_ID_PREFIX",
    "CHUNK_SEPARATOR",
    "FixedLayout",
    "OnMismatch",
    "PlacedRecord",
    "ROLES",
    "RecordChunks",
    "SourceRecord",
    "Target",
    "append_records",
    "assemble_records",
    "call_effort",
    "check_on_mismatch",
    "check_usage",
    "conversation",
    "placed_records",
    "placement_report",
    "merge_records",
    "record_chunks",
    "record_index",
    "record_settings",
    "refuse_tools",
    "relevance_scores",
    "rendered_ids",
    "rendered_tokens",
    "KeptReply",
    "ReplyStore",
    "StreamedReply",
    "check_limit",
    "rank_records",
    "reorder_profile",
    "reorder_records",
    "UnusableScoreWarning",
    "reported_identity",
    "resolve_options",
    "resolve_settings",
    "resolve_target",
    "stale_reason",
    "CONTEXT_VARIABLE",
    "FilledSlot",
    "fill_slot",
    "slot_marker",
    "EVIDENCE_KEY",
    "SCORE_KEYS",
    "content_text",
    "metadata_record",
    "tool_call_dict",
    "SUMMARY_KEYS",
    "CompressedRecord",
    "FixedPrompt",
    "fixed_prompt",
    "PlanSent",
    "TargetArgs",
    "TargetOptions",
    "UsagePlans",
    "carried_plan",
    "check_context_variable",
    "check_fixed_prompt",
    "check_raw_usage",
    "check_tool_schemas",
    "replan_warning",
    "require_chat",
    "target_keywords",
    "target_of",
    "then_last",
    "then_last_async",
    "template_inputs",
    "tools_fix",
    # one adapter's agent-step state; a synthesis step's conversation, plan and count
    "AgentStepper",
    "CallNeutralizer",
    "ResultNeutralizer",
    "neutral_calls",
    "neutral_messages",
    "neutral_result",
    "neutral_text",
    "scanner_of",
    "ASSEMBLY_KEY",
    "CARRIED_KEYS",
    "CarriedAssembly",
    "PLACEHOLDERS",
    "PLACEMENT_KEY",
    "assemble_carried",
    "carried_metadata",
    "carried_text",
    "plan_to_send",
    "reply_prompt_tokens",
    "tagged_conversation",
]
