# syntax=docker/dockerfile:1
#
# Two images from one build: the default (last) stage is tokenwarden, and
# --target fakellm gives the mock LLM used by docker-compose.yaml.
#
#   docker build -t tokenwarden .
#   docker build --target fakellm -t fakellm .

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
# The release "tokenwarden -version" prints: docker build --build-arg VERSION=v1.2.3
ARG VERSION=""
# Static binaries: the runtime images have no libc.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/ ./cmd/tokenwarden ./cmd/fakellm

FROM gcr.io/distroless/static-debian12:nonroot AS fakellm
COPY --from=build /out/fakellm /usr/local/bin/fakellm
USER nonroot:nonroot
EXPOSE 8081
ENTRYPOINT ["/usr/local/bin/fakellm"]
CMD ["-listen", "0.0.0.0:8081"]

FROM gcr.io/distroless/static-debian12:nonroot AS tokenwarden
COPY --from=build /out/tokenwarden /usr/local/bin/tokenwarden
USER nonroot:nonroot
# ext_proc gRPC, admin HTTP (/metrics, /healthz, /readyz). Without -config the
# embedded default listens on 127.0.0.1 only: give a config with 0.0.0.0.
EXPOSE 50051 9090
ENTRYPOINT ["/usr/local/bin/tokenwarden"]
