#!/usr/bin/env bash
# Installs redis-server (and redis-cli, redis-benchmark) for the tests of
# accounting/redisstore and anything using its redistest package. The
# tests start and stop their own servers: this script starts no daemon.
# Idempotent. The clock-skew test also needs a C compiler (cc).
set -euo pipefail
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server
fi
redis-server --version
