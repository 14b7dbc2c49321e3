# The Tandem controller image. Node 24 runs the TypeScript sources directly (type stripping), so
# there is no build step: the first stage installs production dependencies only, the second
# copies them with the sources into a small runtime image that runs as a non-root user and
# writes nothing to its root filesystem (the Deployment mounts it read-only).
FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts && npm cache clean --force

FROM node:24-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY src ./src
# 65532: the conventional "nonroot" uid; the Deployment also sets runAsNonRoot.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["node", "src/cli/main.ts"]
CMD ["controller", "--leader-elect", "--metrics-addr=0.0.0.0:8080"]
