"""The reference model: a small LM with chunked KV compression, shipped as package data."""
