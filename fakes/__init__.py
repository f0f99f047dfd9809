"""Fake LLM providers on 127.0.0.1 that the tests and the benchmarks both start: the scripted
OpenAI-compatible server (:mod:`fakes.openai_server`). Not part of the package."""
