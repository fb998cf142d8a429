"""A small OpenAI-compatible HTTP server for local models and tests.

Import the submodules: :mod:`phaseaware.serving.openai_server` (the server,
``start_server``, ``ServerEngine``) and :mod:`phaseaware.serving.task_engine`
(a model-free engine for tests). Nothing heavy is imported here.
"""
