"""HTTP client for Tenso endpoints (``TensoResponse`` / ``get_tenso_data``), over httpx.

Upstream ``tenso.client`` 0.24's ``TensoFastAPIClient``, on libtenso: request bodies are sent
from the arrays' own memory (libtenso builds the header; no packet buffer); ``stream_predict``
decodes the response as it arrives with libtenso's stream decoder instead of joining the chunks
first.

Needs the ``fastapi`` extra (``pip install libtenso[fastapi]``; only httpx is used here).
"""

from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from . import _tenso
from .core import _aslices, _ended_inside_packet, _pieces, _slices, loads

__all__ = ["TensoFastAPIClient"]

# Request body slices handed to httpx at a time.
_CHUNK = 1 << 20


class TensoFastAPIClient:
    """
    Client for endpoints that take a Tenso packet and answer with one.

    Parameters
    ----------
    base_url : str
        Server root, e.g. ``"http://127.0.0.1:8000"``.
    timeout : float, default 30.0
        httpx timeout, in seconds.
    check_integrity : bool, default False
        Append the XXH3 integrity footer to request packets.
    headers : dict, optional
        Extra headers for every request (authentication, tracing).

    HTTP errors raise ``httpx.HTTPStatusError`` (``raise_for_status``), as upstream.

    Examples
    --------
    Against a server from :func:`tenso.serve.create_app`::

        with TensoFastAPIClient("http://127.0.0.1:8000") as client:
            y = client.predict("/infer", np.ones((2, 3), np.float32))
            y = client.predict("/infer", x, compress=True)   # LZ4 request body
        # async: y = await client.apredict("/infer", x); await client.aclose()
    """

    def __init__(
        self,
        base_url: str,
        timeout: float = 30.0,
        check_integrity: bool = False,
        headers: Optional[Dict[str, str]] = None,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout
        self._check_integrity = check_integrity
        self._extra_headers = dict(headers or {})
        self._sync_client: Any = None
        self._async_client: Any = None

    def _get_sync_client(self) -> Any:
        if self._sync_client is None:
            import httpx

            self._sync_client = httpx.Client(
                base_url=self._base_url, timeout=self._timeout, headers=self._extra_headers
            )
        return self._sync_client

    def _get_async_client(self) -> Any:
        if self._async_client is None:
            import httpx

            self._async_client = httpx.AsyncClient(
                base_url=self._base_url, timeout=self._timeout, headers=self._extra_headers
            )
        return self._async_client

    def _make_headers(self) -> Dict[str, str]:
        return {"content-type": "application/octet-stream"}

    def _request(self, tensor: Any, compress: bool) -> Tuple[List[Union[bytes, memoryview]], Dict[str, str]]:
        # The packet's pieces, bodies as views of the arrays (no packet buffer), sent as a
        # stream of slices with its Content-Length. (httpx would iterate a memoryview given as
        # `content` element by element: upstream's client fails there with a TypeError.)
        pieces = _pieces(tensor, False, self._check_integrity, compress)
        headers = self._make_headers()
        headers["content-length"] = str(sum(len(p) for p in pieces))
        return pieces, headers

    def predict(self, endpoint: str, tensor: Union[np.ndarray, Dict[str, Any]], compress: bool = False) -> Any:
        """
        POST ``tensor`` as a packet to ``endpoint`` and decode the response packet.

        Parameters
        ----------
        endpoint : str
            Path, e.g. ``"/infer"``.
        tensor : numpy.ndarray, dict, or anything :func:`tenso.dumps` takes
            The request.
        compress : bool, default False
            LZ4-compress the request's dense bodies.

        Returns
        -------
        Any
            The decoded response: zero-copy read-only arrays over the response body.
        """
        pieces, headers = self._request(tensor, compress)
        response = self._get_sync_client().post(endpoint, content=_slices(pieces, _CHUNK), headers=headers)
        response.raise_for_status()
        return loads(response.content)

    async def apredict(self, endpoint: str, tensor: Union[np.ndarray, Dict[str, Any]], compress: bool = False) -> Any:
        """As :meth:`predict`, with ``httpx.AsyncClient``."""
        pieces, headers = self._request(tensor, compress)
        response = await self._get_async_client().post(endpoint, content=_aslices(pieces, _CHUNK), headers=headers)
        response.raise_for_status()
        return loads(response.content)

    def stream_predict(self, endpoint: str, tensor: Union[np.ndarray, Dict[str, Any]]) -> Any:
        """
        As :meth:`predict`, reading the response incrementally: each chunk goes straight into
        libtenso's stream decoder (the packet's own buffer), so the body is never held twice.

        Raises
        ------
        httpx.HTTPStatusError
            A 4xx/5xx response.
        ValueError
            The response is not a packet; a TensoTruncatedError (also an EOFError) when it
            ends inside the packet.
        """
        decoder = _tenso.Decoder(None, False, False, False)
        obj = None
        got = 0
        pieces, headers = self._request(tensor, False)
        with self._get_sync_client().stream(
            "POST", endpoint, content=_slices(pieces, _CHUNK), headers=headers
        ) as response:
            response.raise_for_status()
            for chunk in response.iter_raw() if _identity(response) else response.iter_bytes():
                data = memoryview(chunk)
                got += len(data)
                while obj is None and len(data):
                    consumed, obj = decoder.feed(data)
                    data = data[consumed:]
        if obj is None:
            _ended_inside_packet(decoder, got)  # raises TensoTruncatedError (an EOFError)
            raise EOFError("Stream ended before a packet was received")
        return obj

    def close(self) -> None:
        """Close the sync client. For the async one, use ``async with`` or ``await aclose()``."""
        if self._sync_client is not None:
            self._sync_client.close()
            self._sync_client = None

    async def aclose(self) -> None:
        """Close both clients."""
        if self._async_client is not None:
            await self._async_client.aclose()
            self._async_client = None
        self.close()

    def __enter__(self) -> "TensoFastAPIClient":
        return self

    def __exit__(self, *args: object) -> None:
        self.close()

    async def __aenter__(self) -> "TensoFastAPIClient":
        return self

    async def __aexit__(self, *args: object) -> None:
        await self.aclose()


def _identity(response: Any) -> bool:
    # Without a Content-Encoding the raw bytes are the body: skip httpx's decoder pass.
    return bool(response.headers.get("content-encoding", "identity") == "identity")
