"""What a request is: chunks (``chunks``), options (``options``) and the neutralising of
control strings in untrusted chunk text (``untrusted``). No planning, no tokenization."""
