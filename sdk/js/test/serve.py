"""A real tenso.serve app (uvicorn) for sdk/js/test/browser.test.js, on 127.0.0.1:PORT:

    GET  /tensor   float32 [48, 64]: value (i + j) at row i, column j (the viewer draws it)
    GET  /bundle   {"image": float32 [8, 8], "signal": float32 [100], "labels": int64 [4]}
    POST /double   tenso.serve endpoint: the request tensor times 2
    GET  /health   tenso.serve's health check

CORS allows any origin: the viewer page is served from another port.
Usage: python serve.py PORT
"""

import sys

import numpy as np
from fastapi.middleware.cors import CORSMiddleware

from tenso.fastapi import TensoResponse
from tenso.serve import create_app, run

app = create_app(title="sdk/js browser test")
app.app.add_middleware(CORSMiddleware, allow_origins=["*"], allow_methods=["*"], allow_headers=["*"])

IMAGE = np.add.outer(np.arange(48), np.arange(64)).astype(np.float32)


@app.app.get("/tensor")
def tensor() -> TensoResponse:
    return TensoResponse(IMAGE)


@app.app.get("/bundle")
def bundle() -> TensoResponse:
    return TensoResponse(
        {
            "image": IMAGE[:8, :8].copy(),
            "signal": np.sin(np.linspace(0, 6.28, 100)).astype(np.float32),
            "labels": np.arange(4, dtype=np.int64),
        }
    )


@app.tenso_endpoint("/double")
def double(x):
    return x * 2


if __name__ == "__main__":
    run(app, host="127.0.0.1", port=int(sys.argv[1]), workers=1, log_level="warning")
