"""Re-tokenizing a prompt exactly and cheaply: the bounded chunk-token cache (``cache``),
cut rules per tokenizer family (``cuts``), stand-in joins (``joins``), windowed verification
(``windowed``) and DeepSeek-V4's HF pre-tokenizer support check (``windowed_hf``)."""
