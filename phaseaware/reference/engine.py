"""The reference model as a :class:`phaseaware.serving.openai_server.ServerEngine`.

Greedy decoding, one request at a time (a lock serialises calls). Prompts are
full prompt strings (BOS and template markers included); token counts come
from the model's own tokenizer, so ``usage.prompt_tokens`` is exact.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from phaseaware.reference.paths import MODEL_NAME
from phaseaware.serving.openai_server import GenerationResult

__all__ = ["ReferenceEngine"]


class ReferenceEngine:
    """Serve ``model``/``tokenizer`` (from :func:`load_reference`) greedily."""

    def __init__(self, model: Any, tokenizer: Any, *, model_name: str = MODEL_NAME) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.max_context_tokens = int(model.config.max_position_embeddings)
        self._lock = threading.Lock()

    def render_chat(self, messages: Sequence[Mapping[str, str]]) -> str:
        from phaseaware.serving.requests import RequestError

        try:
            return self.tokenizer.apply_chat_template(
                [dict(m) for m in messages], tokenize=False, add_generation_prompt=True
            )
        except Exception as exc:  # jinja raise_exception: unsupported role
            raise RequestError(400, str(exc), param="messages", code=None) from exc

    def encode(self, prompt: str) -> list[int]:
        return list(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])

    def count_tokens(self, prompt: str) -> int:
        return len(self.encode(prompt))

    def generate(
        self, prompt: str, *, max_tokens: int, temperature: float, stop: tuple[str, ...]
    ) -> GenerationResult:
        """Greedy continuation (``temperature`` is ignored), cut at ``<eos>`` or a stop string.

        ``logprobs`` is not reported (the server answers ``null``).
        """
        import torch

        ids = self.encode(prompt)
        eos = self.tokenizer.eos_token_id
        new: list[int] = []
        finish = "length"
        with self._lock, torch.no_grad():
            for _ in range(max_tokens):
                if len(ids) + len(new) >= self.max_context_tokens:
                    break
                x = torch.tensor([ids + new], device=self.model.device)
                step = self.model(x).logits[0, -1]
                token = int(step.argmax())
                if token == eos:
                    finish = "stop"
                    break
                new.append(token)
                text = self.tokenizer.decode(new, skip_special_tokens=True)
                if any(s and s in text for s in stop):
                    finish = "stop"
                    break
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        for s in stop:
            if s and s in text:
                text = text[: text.index(s)]
        return GenerationResult(text=text, completion_tokens=len(new), finish_reason=finish)
