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
measured the text). Whitespace control (``{%-`` / ``-%}``) on the loop is kept.
"""

from __future__ import annotations

import re
from dataclasses import replace

from haystack.dataclasses import ChatMessage, ChatRole, TextContent

import phaseaware.integrate as kit
from phaseaware.errors import InputError

__all__ = ["SLOT_VARIABLE", "slot_template"]

SLOT_VARIABLE = "phaseaware_context"  # the template variable the loop becomes

_LOOP = r"\{%(?P<open>-?)\s*for\s+(?P<name>\w+)\s+in\s+DOCS\s*-?%\}(?P<body>.*?)\{%-?\s*endfor\s*(?P<close>-?)%\}"  # noqa: E501


def _loop(documents_key: str) -> re.Pattern[str]:
    return re.compile(_LOOP.replace("DOCS", re.escape(documents_key)), re.DOTALL)


def _rewrite(text: str, pattern: re.Pattern[str], found: list[str]) -> str:
    def one(match: re.Match[str]) -> str:
        name = match["name"]
        body = re.fullmatch(
            r"\s*\{\{-?\s*" + re.escape(name) + r"\.content\s*-?\}\}\s*", match["body"]
        )
        if body is None:
            raise InputError(
                f"the loop over the documents writes {match['body'].strip()!r}; it may write "
                f"{{{{ {name}.content }}}} only: phaseaware places each document's text "
                "itself (put labels or metadata into the documents' content)"
            )
        found.append(match[0])
        return "{{" + match["open"] + f" {SLOT_VARIABLE} " + match["close"] + "}}"

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
