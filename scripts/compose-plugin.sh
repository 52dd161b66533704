#!/usr/bin/env bash
# Install Docker Compose v2 as a docker CLI plugin (`docker compose`), built
# from source with the Go toolchain through the Go module proxy: no image
# registry and no release download. deploy/compose.yaml needs v2 (Debian's
# Python docker-compose 1.x cannot pass systempaths=unconfined).
set -euo pipefail
VERSION=${COMPOSE_VERSION:-v2.40.3}
DEST=/usr/local/lib/docker/cli-plugins/docker-compose
if docker compose version >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" != 0 ]; then echo "compose-plugin.sh: not root; skipping Docker Compose"; exit 0; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dir=$(go mod download -json "github.com/docker/compose/v2@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
cp -r "$dir" "$work/src"
chmod -R u+w "$work/src"
(cd "$work/src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$VERSION" -o "$work/docker-compose" ./cmd)
install -D -m 0755 "$work/docker-compose" "$DEST"
echo "compose-plugin.sh: docker compose $VERSION installed in $DEST"
