"""Local SPARQL servers: one engine abstraction for Virtuoso and Oxigraph, used by tests, benchmarks and users.

Modules: :mod:`~kgqa.kg.servers.engine` (:class:`ServerEngine`: start, wait until it answers, stop, whether it runs,
load), :mod:`~kgqa.kg.servers.oxigraph` and :mod:`~kgqa.kg.servers.virtuoso` (the two engines; Virtuoso's settings from
a memory budget and its ``virtuoso.ini``), :mod:`~kgqa.kg.servers.process` (server processes by pid, ports,
executables), :mod:`~kgqa.kg.servers.local` (:class:`OxigraphServer`, :class:`VirtuosoServer`: throw-away servers for
tests and benchmarks) and :mod:`~kgqa.kg.servers.export` (a KG written as N-Triples, to load into any server).
``kgqa kg endpoint`` (:mod:`kgqa.kg.endpoint`) runs the same engines detached, found again from their directory.
"""

from __future__ import annotations

from kgqa.kg.servers.engine import ServerEngine
from kgqa.kg.servers.export import export_ntriples, literal_to_ntriples
from kgqa.kg.servers.local import OxigraphServer, VirtuosoServer
from kgqa.kg.servers.oxigraph import OxigraphEngine
from kgqa.kg.servers.process import ServerProcess, find_executable, free_port
from kgqa.kg.servers.virtuoso import VirtuosoEngine, VirtuosoSettings, render_virtuoso_ini, run_isql, virtuoso_settings

__all__ = ["OxigraphEngine", "OxigraphServer", "ServerEngine", "ServerProcess", "VirtuosoEngine", "VirtuosoServer",
           "VirtuosoSettings", "export_ntriples", "find_executable", "free_port", "literal_to_ntriples",
           "render_virtuoso_ini", "run_isql", "virtuoso_settings"]
