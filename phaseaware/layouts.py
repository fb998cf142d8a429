"""Prompt layouts: what comes before and after the retrieved context.

A layout turns ``(system, context, question)`` into the exact prompt string the
tokenizer sees. Because BPE merges across boundaries, callers never add token
counts of parts; they render and re-tokenize. ``split`` gives the fixed prefix
and suffix strings around the context so planners can reason about positions.

INTERFACE CONTRACT (implemented by the tokenizers/layouts work item):

    @dataclass(frozen=True)
    class RenderedPrompt:
        text: str                       # full prompt, BOS/template included
        context_start: int              # char offset of the context in text
        context_end: int
        messages: tuple[dict[str, str], ...] | None  # chat messages, None for plain

    class PromptLayout(Protocol):
        name: str
        def render(self, *, system: str | None, context: str, question: str) -> RenderedPrompt
        def split(self, *, system: str | None, question: str) -> tuple[str, str]
            # (prefix, suffix) with render(...).text == prefix + context + suffix

    def get_layout(name: str, tokenizer: Tokenizer, **options) -> PromptLayout
        # names: "none", "chatml", "hf", "deepseek-v4" (options: thinking: bool)
"""
