# Copyright The inferprof Authors
# SPDX-License-Identifier: Apache-2.0

# otelcol-inferprof image: `make image` (needs a Docker engine).
#
# Stages: the collector and launcher built the way `make build` builds them
# (ocb and every module from the Go module proxy); the CUPTI injection
# library built against a real CUDA toolkit, one per CUDA major; then a
# Debian slim runtime. Debian rather than distroless: the binary uses cgo
# (go-nvml) and links glibc, and the engine pod example copies the launcher
# out of this image with `cp`, which distroless has no shell for.
#
# Layout, as `make install PREFIX=/opt/inferprof` makes it and inferprof-run
# searches it: /opt/inferprof/{bin,lib/cuda<major>,share/inferprof/python}.
# /otelcol-inferprof is the path the OpenTelemetry Collector Helm chart runs
# (command.name); the shipped configs are in /etc/inferprof.

ARG GO_VERSION=1.26.8
ARG DEBIAN=bookworm

FROM golang:${GO_VERSION}-${DEBIAN} AS build
WORKDIR /src
COPY . .
ENV GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
RUN make build && make install PREFIX=/opt/inferprof

# The CUPTI library: cupti_activity.h and cuda.h from the toolkit's devel
# image. Add a stage per CUDA major your engines use.
FROM nvidia/cuda:12.8.1-devel-ubuntu22.04 AS cupti12
WORKDIR /src
COPY native/cupti native/cupti
RUN make -C native/cupti lib CUDA_HOME=/usr/local/cuda

FROM nvidia/cuda:13.0.1-devel-ubuntu24.04 AS cupti13
WORKDIR /src
COPY native/cupti native/cupti
RUN make -C native/cupti lib CUDA_HOME=/usr/local/cuda

FROM debian:${DEBIAN}-slim
RUN groupadd --gid 10001 inferprof \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin inferprof
COPY --from=build /opt/inferprof /opt/inferprof
COPY --from=cupti12 /src/native/cupti/build/cuda12/libinferprof_cupti.so /opt/inferprof/lib/cuda12/libinferprof_cupti.so
COPY --from=cupti13 /src/native/cupti/build/cuda13/libinferprof_cupti.so /opt/inferprof/lib/cuda13/libinferprof_cupti.so
COPY config/ /etc/inferprof/
RUN ln -s /opt/inferprof/bin/otelcol-inferprof /otelcol-inferprof \
 && rm -f /etc/inferprof/*.md
USER 10001
EXPOSE 4317 4318 8889 13133
ENTRYPOINT ["/otelcol-inferprof"]
CMD ["--config", "/etc/inferprof/agent.yaml"]
