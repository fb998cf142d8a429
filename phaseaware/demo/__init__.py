"""The end-to-end story on the reference model: calibrate, then answer RAG questions."""
