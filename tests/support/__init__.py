"""Test-only machinery: model-free engines, the fault-injecting server, a batch runner.

Import as ``tests.support.<module>`` from the repository root (``python -m pytest`` puts
it on ``sys.path``; ``tests`` is a namespace package).
"""
