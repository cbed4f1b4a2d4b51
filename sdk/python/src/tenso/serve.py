"""Quick-start servers for tensors: a FastAPI app whose endpoints take and return Tenso packets,
run with uvicorn, and a gRPC server for the ``TensorInference`` service (:mod:`tenso.grpc`).

Upstream ``tenso.serve`` 0.24's names, signatures and behaviour, on libtenso.

Example::

    from tenso.serve import create_app, run

    app = create_app()

    @app.tenso_endpoint("/infer")
    def infer(tensor):
        return tensor * 2.0

    run(app, workers=4)

Needs the ``fastapi`` extra (``run_grpc``: the ``grpc`` extra).
"""

import asyncio
import logging
import os
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

logger = logging.getLogger("tenso.serve")

__all__ = ["TensoApp", "create_app", "run", "run_grpc", "grpc_server"]


def _detect_workers() -> int:
    """Worker processes for ``run``: half the CPUs (numpy/torch threads in each worker need the
    other half), at least 1 and at most 8, as upstream."""
    cpu_count = os.cpu_count() or 1
    return max(1, min(cpu_count // 2, 8))


class TensoApp:
    """
    A FastAPI application set up for Tenso endpoints.

    Parameters
    ----------
    title : str
        The FastAPI title.
    check_integrity : bool, default False
        Append XXH3 footers to every endpoint's responses.
    max_body_bytes : int, optional
        The largest request body (413 above it); default
        :data:`tenso.fastapi.MAX_BODY_BYTES`. Not in upstream.
    """

    def __init__(
        self,
        title: str = "Tenso Server",
        check_integrity: bool = False,
        max_body_bytes: Optional[int] = None,
    ) -> None:
        from fastapi import FastAPI

        self._app = FastAPI(title=title)
        self._check_integrity = check_integrity
        self._max_body_bytes = max_body_bytes
        self._endpoints: List[str] = []

    @property
    def app(self) -> Any:
        """The underlying FastAPI application (what uvicorn serves)."""
        return self._app

    def tenso_endpoint(
        self,
        path: str,
        method: str = "POST",
        check_integrity: Optional[bool] = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """
        Decorator: ``func(tensor) -> result`` becomes an endpoint at ``path`` that decodes the
        request body (:func:`tenso.fastapi.get_tenso_data`'s statuses for bad bodies) and sends
        the result as a :class:`tenso.fastapi.TensoResponse`.

        Coroutine functions are awaited; plain functions run in the default thread pool so
        they do not block the event loop. Returns ``func`` unchanged.

        Parameters
        ----------
        path : str
            URL path.
        method : str, default "POST"
            HTTP method.
        check_integrity : bool, optional
            This endpoint's integrity footers; default the app's.
        """
        integrity = self._check_integrity if check_integrity is None else check_integrity

        def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
            from fastapi import Request

            from .fastapi import TensoResponse, get_tenso_data, tenso_data

            read = get_tenso_data if self._max_body_bytes is None else tenso_data(self._max_body_bytes)
            is_async = asyncio.iscoroutinefunction(func)

            async def endpoint_handler(request: Request) -> TensoResponse:
                tensor = await read(request)
                if is_async:
                    result = await func(tensor)
                else:
                    result = await asyncio.get_running_loop().run_in_executor(None, func, tensor)
                return TensoResponse(result, check_integrity=integrity)

            self._app.add_api_route(path, endpoint_handler, methods=[method.upper()])
            self._endpoints.append(path)
            return func

        return decorator

    def add_health_check(self, path: str = "/health") -> None:
        """Add ``GET path`` answering ``{"status": "ok", "endpoints": [...]}``."""

        @self._app.get(path)
        def health() -> Dict[str, Any]:
            return {"status": "ok", "endpoints": self._endpoints}


def create_app(
    title: str = "Tenso Server",
    check_integrity: bool = False,
    health_check: bool = True,
) -> TensoApp:
    """
    A new :class:`TensoApp`, with a ``/health`` route unless ``health_check`` is False.

    Examples
    --------
    >>> from tenso.serve import create_app
    >>> app = create_app()
    >>> @app.tenso_endpoint("/infer")
    ... def infer(tensor):
    ...     return tensor * 2.0
    """
    app = TensoApp(title=title, check_integrity=check_integrity)
    if health_check:
        app.add_health_check()
    return app


def run(
    app: TensoApp,
    host: str = "0.0.0.0",
    port: int = 8000,
    workers: Optional[int] = None,
    log_level: str = "info",
    app_import_string: Optional[str] = None,
) -> None:
    """
    Serve ``app`` with uvicorn until interrupted.

    Parameters
    ----------
    app : TensoApp
        What to serve.
    host, port : str, int
        Where to listen.
    workers : int, optional
        Worker processes; default :func:`_detect_workers`. More than one needs
        ``app_import_string`` (uvicorn imports the app in each worker); without it this warns
        (RuntimeWarning) and serves with one, as upstream.
    log_level : str
        uvicorn's log level.
    app_import_string : str, optional
        ``"module:attr"`` of the ASGI app (e.g. ``"server:app.app"``).
    """
    import uvicorn

    if workers is None:
        workers = _detect_workers()
    target: Any = app.app
    if workers > 1 and app_import_string is not None:
        target = app_import_string
    elif workers > 1:
        warnings.warn(
            "Multi-worker serving requires an import string "
            "(app_import_string='module:app'); a live app object cannot be "
            "used with workers > 1. Falling back to workers=1.",
            RuntimeWarning,
            stacklevel=2,
        )
        workers = 1
    uvicorn.run(
        target,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        limit_concurrency=1000,
        timeout_keep_alive=30,
    )


def grpc_server(
    servicer_class: Any,
    port: int = 50051,
    max_workers: Optional[int] = None,
    max_message_length: int = 256 * 1024 * 1024,
    host: str = "[::]",
) -> Tuple[Any, int]:
    """
    Start (without waiting on it) the gRPC server :func:`run_grpc` runs. Not in upstream.

    Returns
    -------
    (grpc.Server, int)
        The started server (``server.stop(grace)`` ends it) and the port it listens on (the
        one chosen by the system when ``port`` is 0).

    Raises
    ------
    RuntimeError
        The address could not be bound.
    """
    from concurrent import futures

    import grpc

    from .grpc import tenso_msg_pb2_grpc

    if max_workers is None:
        max_workers = _detect_workers() * 2
    options = [
        ("grpc.max_send_message_length", max_message_length),
        ("grpc.max_receive_message_length", max_message_length),
    ]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers), options=options)
    tenso_msg_pb2_grpc.add_TensorInferenceServicer_to_server(servicer_class, server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if not bound:
        raise RuntimeError(f"gRPC: cannot listen on {host}:{port}")
    server.start()
    logger.info("Tenso gRPC server started on port %d with %d workers", bound, max_workers)
    return server, bound


def run_grpc(
    servicer_class: Any,
    port: int = 50051,
    max_workers: Optional[int] = None,
    max_message_length: int = 256 * 1024 * 1024,
) -> None:
    """
    Serve a ``TensorInference`` servicer with grpcio until the server is stopped.

    Parameters
    ----------
    servicer_class : tenso.grpc.tenso_msg_pb2_grpc.TensorInferenceServicer
        The servicer instance (upstream's parameter name).
    port : int, default 50051
        Listen port, on every interface.
    max_workers : int, optional
        Thread pool size; default twice :func:`_detect_workers`.
    max_message_length : int, default 256 MiB
        Largest message either way (large tensors).
    """
    server, _ = grpc_server(servicer_class, port, max_workers, max_message_length)
    server.wait_for_termination()
