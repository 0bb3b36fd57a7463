"""The public API an SSEBench extension (a backend, a command) builds on.

from ssebench.extensions import Backend, RunSpec
"""

from ssebench.spec import (
    Backend,
    BackendError,
    ImageRequest,
    Images,
    ImageUnavailableError,
    Mount,
    NetworkPolicy,
    PlatformNotFoundError,
    PlatformRefusedError,
    PlatformTimeoutError,
    PlatformUnavailableError,
    ProxyEndpoint,
    RunHandle,
    RunInfo,
    RunSpec,
    RunTimeoutError,
    SidecarPair,
    SSEBenchError,
    UserError,
    prebuilt_images,
)

__all__ = [
    "Backend",
    "BackendError",
    "ImageRequest",
    "ImageUnavailableError",
    "Images",
    "Mount",
    "NetworkPolicy",
    "PlatformNotFoundError",
    "PlatformRefusedError",
    "PlatformTimeoutError",
    "PlatformUnavailableError",
    "ProxyEndpoint",
    "RunHandle",
    "RunInfo",
    "RunSpec",
    "RunTimeoutError",
    "SSEBenchError",
    "SidecarPair",
    "UserError",
    "prebuilt_images",
]
