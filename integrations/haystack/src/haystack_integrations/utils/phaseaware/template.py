"""The documents slot of a ``ChatPromptBuilder`` template, as its users write it.

Haystack RAG templates write the retrieved documents with a loop::

    {% for document in documents %}
        {{ document.content }}
    {% endfor %}

phaseaware writes the documents itself (its order, pads between them, the restated
evidence), so the whole loop becomes one variable, :data:`SLOT_VARIABLE`, which the
builder formats with the kit's slot marker (:func:`phaseaware.integrate.slot_marker`);
every other part of the template is rendered by ``ChatPromptBuilder`` itself. The loop
must write ``{{ <name>.content }}`` and whitespace only: per-document labels belong in
the documents' content (a label written by the loop would not be where phaseaware
measured the text). The body's whitespace before the content is written once before the
documents, the whitespace after it once after them, and Jinja's whitespace control
(``{%-``, ``-%}``, ``{{-``, ``-}}``) is kept; so where that whitespace is the separator
(``\n{{ d.content }}\n``: ``"\n\n"`` between documents), the messages are
``ChatPromptBuilder``'s own, the documents in phaseaware's order with its pads.
"""

from __future__ import annotations

import re
from dataclasses import replace

from haystack.dataclasses import ChatMessage, ChatRole, TextContent

import phaseaware.integrate as kit
from phaseaware.errors import InputError

__all__ = ["SLOT_VARIABLE", "slot_template"]

SLOT_VARIABLE = "phaseaware_context"  # the template variable the loop becomes

_LOOP = (
    r"\{%(?P<open>-?)\s*for\s+(?P<name>\w+)\s+in\s+DOCS\s*(?P<after_for>-?)%\}(?P<body>.*?)"
    r"\{%(?P<before_end>-?)\s*endfor\s*(?P<close>-?)%\}"
)


def _loop(documents_key: str) -> re.Pattern[str]:
    return re.compile(_LOOP.replace("DOCS", re.escape(documents_key)), re.DOTALL)


def _rewrite(text: str, pattern: re.Pattern[str], found: list[str]) -> str:
    def one(match: re.Match[str]) -> str:
        name = match["name"]
        body = re.fullmatch(
            r"(?P<lead>\s*)\{\{(?P<strip_lead>-?)\s*" + re.escape(name)
            + r"\.content\s*(?P<strip_trail>-?)\}\}(?P<trail>\s*)",
            match["body"],
        )  # fmt: skip
        if body is None:
            raise InputError(
                f"the loop over the documents writes {match['body'].strip()!r}; it may write "
                f"{{{{ {name}.content }}}} only: phaseaware places each document's text "
                "itself (put labels or metadata into the documents' content)"
            )
        found.append(match[0])
        lead = "" if match["after_for"] or body["strip_lead"] else body["lead"]
        trail = "" if match["before_end"] or body["strip_trail"] else body["trail"]
        before = "{{- '' }}" if match["open"] else ""  # strips what precedes the loop
        after = "{{ '' -}}" if match["close"] else ""  # strips what follows it
        return f"{before}{lead}{{{{ {SLOT_VARIABLE} }}}}{trail}{after}"

    if SLOT_VARIABLE in text:
        raise InputError(f"the template uses {SLOT_VARIABLE!r}, a name phaseaware reserves")
    return pattern.sub(one, text)


def slot_template(
    template: list[ChatMessage] | str, *, documents_key: str = "documents"
) -> list[ChatMessage] | str:
    """``template`` with its one loop over ``documents_key`` replaced by
    ``{{ phaseaware_context }}`` (a new template; the caller's messages are not changed).
    ``MissingSlotError`` / ``DuplicateSlotError`` when there is no loop or several."""
    pattern = _loop(documents_key)
    found: list[str] = []
    if isinstance(template, str):
        out: list[ChatMessage] | str = _rewrite(template, pattern, found)
    elif isinstance(template, list) and all(isinstance(m, ChatMessage) for m in template):
        out = []
        for message in template:
            if not message.is_from(ChatRole.USER) and not message.is_from(ChatRole.SYSTEM):
                if any(pattern.search(t) for t in message.texts):
                    raise InputError(
                        f"the loop over {documents_key!r} is in a message of role {message.role.value!r}; "
                        "ChatPromptBuilder renders system and user messages only: move it there"
                    )
                out.append(message)
                continue
            content = [
                TextContent(_rewrite(p.text, pattern, found)) if isinstance(p, TextContent) else p
                for p in message._content  # as ChatPromptBuilder renders its parts
            ]
            out.append(replace(message, _content=content))
    else:
        raise InputError(
            "template must be a list of haystack ChatMessage objects or a string template, "
            f"got {type(template).__name__}"
        )
    if not found:
        raise kit.MissingSlotError(
            f"the template has no loop over {documents_key!r}; write where the documents go "
            f"as ChatPromptBuilder templates do: {{% for doc in {documents_key} %}}"
            "{{ doc.content }}{% endfor %}"
        )
    if len(found) > 1:
        raise kit.DuplicateSlotError(
            f"the template loops over {documents_key!r} {len(found)} times; keep one loop "
            "(the documents are placed once)"
        )
    return out
