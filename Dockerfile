# Levee: build the TypeScript once, ship only the compiled code and production dependencies on a
# supported Node LTS. Runs as a non-root user and needs no writable root filesystem.

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
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
USER node
EXPOSE 8443
# Liveness of the process itself; in Kubernetes the Deployment's probes call /livez and /readyz.
HEALTHCHECK --interval=10s --timeout=3s \
  CMD ["node", "-e", "require('node:https').get({host:'127.0.0.1',port:8443,path:'/livez',rejectUnauthorized:false},r=>process.exit(r.statusCode===200?0:1)).on('error',()=>process.exit(1))"]
# Flags as in src/nodeflags.ts.
ENTRYPOINT ["node", "--max-semi-space-size=1", "dist/cli.js"]
CMD ["--listen", "0.0.0.0:8443", "--tls-cert-file", "/etc/levee/tls/tls.crt", "--tls-private-key-file", "/etc/levee/tls/tls.key"]
