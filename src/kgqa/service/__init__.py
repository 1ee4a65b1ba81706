"""``kgqa serve``: an HTTP service (FastAPI on uvicorn) and a page that shows how each answer was found.

:func:`create_app` builds the application from :class:`ServiceSettings`; docs/service.md describes the endpoints, the
page and the security model. This floor sits above ``eval`` and below ``cli``: it reads run directories through
:mod:`kgqa.eval`, answers through the method registry, and the CLI only starts it. FastAPI and uvicorn are the
``serve`` extra, imported only when the application is built.
"""

from __future__ import annotations

from typing import Any

from kgqa.service.settings import ServiceSettings, is_loopback

__all__ = ["ServiceSettings", "create_app", "is_loopback"]


def create_app(*args: Any, **kwargs: Any) -> Any:
    """:func:`kgqa.service.app.create_app` (imported on call, so ``import kgqa.service`` needs no FastAPI)."""
    from kgqa.service.app import create_app as build

    return build(*args, **kwargs)
