"""Helpers shared by test modules: fixtures and builders several of them use, the slow reference
forms of the algorithms, a stub OpenAI-compatible server, and the paths of the repository."""
