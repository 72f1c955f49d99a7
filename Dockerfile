# Levee: build the TypeScript once, ship only the compiled code and production dependencies on a
# supported Node LTS. Runs as a non-root user (numeric, so Kubernetes' runAsNonRoot can verify it)
# and writes no file at all: Node, pino (stdout only) and Levee need no writable root filesystem,
# not even /tmp (test/integration/packaging.test.ts runs Levee with no file-write permission).

FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# Scripts are skipped: the only one fetches a Node binary for development machines, and the image
# already has Node 24.
RUN npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN node node_modules/typescript/bin/tsc -p tsconfig.build.json \
 && npm prune --omit=dev --ignore-scripts

FROM node:24-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
# Where the health check asks (not a Levee setting); set it when --listen says otherwise (plain HTTP on loopback for a
# sidecar: http://127.0.0.1:8080/livez).
ENV HEALTHCHECK_URL=https://127.0.0.1:8443/livez
# Owned by root and read-only to Levee: the process cannot change its own code.
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
# The image's "node" user, by number.
USER 1000:1000
EXPOSE 8443
# Liveness of the process itself, for docker and compose; in Kubernetes the Deployment's probes call
# /livez and /readyz. The serving certificate is Levee's own, so it is not verified here.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s \
  CMD ["node", "-e", "const u=new URL(process.env.HEALTHCHECK_URL);require(u.protocol==='https:'?'node:https':'node:http').get(u,{rejectUnauthorized:false},r=>process.exit(r.statusCode===200?0:1)).on('error',()=>process.exit(1))"]
# Flags as in src/nodeflags.ts.
ENTRYPOINT ["node", "--max-semi-space-size=1", "--heap-growing-percent=100", "--external-memory-accounted-in-global-limit", "--no-memory-reducer-favors-memory", "dist/cli.js"]
CMD ["--listen", "0.0.0.0:8443", "--tls-cert-file", "/etc/levee/tls/tls.crt", "--tls-private-key-file", "/etc/levee/tls/tls.key"]
