"""ghz (github.com/bojand/ghz, Apache-2.0), the common gRPC load tool, built from the Go module proxy into the
cache dir once per machine: `authzbench crosscheck` measures the engines with it beside the suite's own
client.

Built like the servers (provision/gobuild.py): module download, writable copy, `go build ./cmd/ghz`; 42 s
here on 2 cores (PROVISIONING.md), 20 MB. Reused while its stamp names the pinned version.
"""

from __future__ import annotations

from pathlib import Path

from authzbench.provision.gobuild import GoModule, go_module_binary

GHZ_VERSION = "v0.93.0"
MODULE = "github.com/bojand/ghz"
# ghz prints its version from main.version (cmd/ghz/main.go), "dev" unless set at link time.
LDFLAGS = f"-s -w -X main.version={GHZ_VERSION.lstrip('v')}"
BUILD_ID = f"{GHZ_VERSION} ldflags-version"


def ghz_binary() -> Path:
    """The cached ghz binary, built if missing or built for another version."""
    return go_module_binary(GoModule("ghz", MODULE, GHZ_VERSION, BUILD_ID, "./cmd/ghz",
                                     build_flags=("-ldflags", LDFLAGS), expect="~1 min"))
