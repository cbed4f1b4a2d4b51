"""Upstream's import path for the shared-memory tensor cache (``from tenso.cache import
TensoCache``): the same class as ``tenso.TensoCache`` (:mod:`tenso.shm`), over libtenso's cache."""

from .shm import TensoCache

__all__ = ["TensoCache"]
