"""VoG (Verify-on-Graph): plan, retrieve, verify against the KG, revise with a bandit-chosen context."""

from kgqa.methods.vog.method import VoG, VoGConfig

__all__ = ["VoG", "VoGConfig"]
