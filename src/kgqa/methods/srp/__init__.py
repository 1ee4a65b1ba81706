"""SRP (Self-Reflective Planning): references, relation check, instantiation, judge and editor."""

from kgqa.methods.srp.method import SRP, SRPConfig

__all__ = ["SRP", "SRPConfig"]
