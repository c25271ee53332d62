# Weft container image: `weft` (gateway / node agent / k8s mode / show / keys) and `weft-wg`.
#
#   docker build -t weft .
#   docker run --rm weft genkey
#
# Two stages. The build stage runs the same npm steps as scripts/setup.sh (npm ci, which also
# builds the native I/O addon through the package's install script, then the TypeScript build;
# test/packaging checks that the commands stay identical). The runtime stage gets only dist/,
# the native addon, production node_modules, bin/ and package.json.
#
# Privileges: the image runs as the unprivileged user "node" (uid 1000) by default, which is all
# that `weft genkey/pubkey/genpsk/show/version` and library use need. NET_ADMIN (and root, or a
# user namespace root) is needed ONLY when a TUN device is created: `weft up`/`weft k8s` (gateway
# and node agent) and `weft-wg`. Then run the container as uid 0 with the capability added and
# everything else dropped, and give it /dev/net/tun, e.g.
#   docker run --user 0 --cap-drop ALL --cap-add NET_ADMIN --device /dev/net/tun weft up -c /etc/weft/gateway.yaml
# (deploy/deployment.yaml does the same in Kubernetes). The node agent also writes
# net.ipv4.conf.<tun>.rp_filter, which needs a writable /proc/sys (its own network namespace).

ARG NODE_VERSION=20.20

FROM node:${NODE_VERSION}-bookworm AS build
WORKDIR /src
# Dependencies first (cached while only sources change). The install script (native/build.mjs)
# builds native/build/Release/weft_io.node with npm's node-gyp and the image's Node headers;
# buildpack-deps (the node:*-bookworm base) brings python3, make and g++.
COPY package.json package-lock.json ./
COPY native/ native/
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src/ src/
COPY bench/ bench/
RUN npm run --silent build
# Production dependencies only for the runtime stage (the addon in native/build stays).
RUN npm prune --omit=dev --no-audit --no-fund

FROM node:${NODE_VERSION}-bookworm-slim AS runtime
# iproute2: the gateway and node agent set addresses, routes and rules with `ip`; nftables and
# conntrack: the node role puts Liqo's fabric FirewallConfigurations into the node's kernel.
RUN apt-get update \
 && apt-get install -y --no-install-recommends iproute2 nftables conntrack \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/weft
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist/src ./dist/src
COPY --from=build /src/dist/bench ./dist/bench
COPY --from=build /src/native/build/Release/weft_io.node ./native/build/Release/weft_io.node
COPY --from=build /src/native/build/Release/weft_crypto.node ./native/build/Release/weft_crypto.node
COPY bin/ ./bin/
COPY examples/ ./examples/
# Control sockets for `weft show` (see src/cli/commands/control-socket.ts).
RUN mkdir -p /run/weft && chown node:node /run/weft
ENV NODE_ENV=production \
    WEFT_RUN_DIR=/run/weft
USER node
ENTRYPOINT ["node", "/opt/weft/bin/weft"]
CMD ["--help"]
